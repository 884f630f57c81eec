"""The dashboard's door: the cluster token, never open by default.

A browser logs in once, on the login page or with ``?token=`` in any address. It gets a cookie
that holds a digest of the token, not the token, and the address loses its token at once (a
redirect), so the token stays out of history and referrers. Scripts send
``Authorization: Bearer <token>`` instead.
"""

from __future__ import annotations

import hashlib
import hmac

from aiohttp import web


def _raw(text: str) -> bytes:
    # A header that is not UTF-8 reaches here with surrogates: it compares unequal, never raises.
    return text.encode("utf-8", "surrogateescape")


class Door:
    def __init__(self, token: str, port: int, secure: bool) -> None:
        self._token = token.encode()
        self._cookie = hmac.new(self._token, b"actorrt dashboard session", hashlib.sha256).hexdigest().encode()
        # Cookies are per host, not per port: two dashboards on one machine keep one each.
        self.cookie_name = f"actorrt_dashboard_{port}"
        self._secure = secure  # served over HTTPS: the cookie travels on HTTPS only

    def is_token(self, given: str) -> bool:
        return hmac.compare_digest(_raw(given), self._token)

    def lets_in(self, request: web.Request) -> bool:
        cookie = request.cookies.get(self.cookie_name, "")
        if cookie and hmac.compare_digest(_raw(cookie), self._cookie):
            return True
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.is_token(given.strip())

    def admit(self, response: web.StreamResponse) -> web.StreamResponse:
        # Lax, not Strict: a link from a notebook on another host name (localhost against
        # 127.0.0.1) must arrive logged in; the dashboard changes nothing, so no request can forge.
        response.set_cookie(self.cookie_name, self._cookie.decode(), httponly=True, samesite="Lax",
                            secure=self._secure, path="/")
        return response
