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

COOKIE = "actorrt_dashboard"


class Door:
    def __init__(self, token: str, secure: bool) -> None:
        self._token = token.encode()
        self._cookie = hmac.new(self._token, b"actorrt dashboard session", hashlib.sha256).hexdigest()
        self._secure = secure  # served over HTTPS: the cookie travels on HTTPS only

    def is_token(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self._token)

    def lets_in(self, request: web.Request) -> bool:
        cookie = request.cookies.get(COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), self._cookie.encode()):
            return True
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.is_token(given.strip())

    def admit(self, response: web.StreamResponse) -> web.StreamResponse:
        response.set_cookie(COOKIE, self._cookie, httponly=True, samesite="Strict", secure=self._secure, path="/")
        return response
