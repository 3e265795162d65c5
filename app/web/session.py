"""The session cookie is Secure whenever the request came over HTTPS."""

from __future__ import annotations

from flask import Flask, request
from flask.sessions import SecureCookieSessionInterface


class SessionInterface(SecureCookieSessionInterface):
    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config.get("SESSION_COOKIE_SECURE")) or request.is_secure
