"""Plain HTTP(S) requests for the dashboard's tests: every answer as it came, redirects not followed."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def fetch(url: str, headers: dict[str, str] | None = None, data: bytes | None = None,
          context: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request; a redirect is an answer like any other."""
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), _NoRedirects)
    try:
        with opener.open(urllib.request.Request(url, data=data, headers=headers or {}), timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
