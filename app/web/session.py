"""Session cookies the server can end.

The cookie is signed, not stored: what the server keeps is each account's session
generation (app.accounts.models.User.session_generation). A cookie names the generation
it was issued under and when its login happened; it counts only while the generation is
still the account's and the login is younger than SESSION_LIFETIME_DAYS. Logging out, a
new password, "log out everywhere" and deleting the account bump the generation, so every
copy of every earlier cookie stops working (docs/security.md)."""

from __future__ import annotations

import time

from flask import Flask, current_app, g, request, session
from flask.sessions import SecureCookieSessionInterface
from flask_login import login_user, logout_user

from app.accounts.models import User

GENERATION_KEY = "_generation"
LOGIN_AT_KEY = "_login_at"
CSRF_KEY = "csrf_token"  # Flask-WTF's key, in the session and on `g`


class SessionInterface(SecureCookieSessionInterface):
    def get_cookie_secure(self, app: Flask) -> bool:
        settings = app.config["LOOPDESK"]
        if settings.session_cookie_secure is not None:
            return settings.session_cookie_secure
        public_https = (settings.public_url or "").startswith("https:")
        return bool(app.config.get("SESSION_COOKIE_SECURE")) or public_https or request.is_secure


def start_session(user: User) -> None:
    """Log `user` in on a fresh session: nothing from before the login survives (no
    session fixation), and the CSRF token is a new one."""
    session.clear()
    g.pop(CSRF_KEY, None)
    login_user(user)
    session.permanent = True  # the cookie outlives the browser, up to the lifetime
    session[GENERATION_KEY] = user.session_generation
    session[LOGIN_AT_KEY] = int(time.time())


def keep_this_session(user: User) -> None:
    """After bumping `user`'s generation (a new password), this browser stays logged in."""
    session[GENERATION_KEY] = user.session_generation


def end_this_session() -> None:
    logout_user()
    session.clear()
    g.pop(CSRF_KEY, None)


def session_is_current(user: User) -> bool:
    """The cookie was issued under the account's present generation, within the lifetime."""
    generation, login_at = session.get(GENERATION_KEY), session.get(LOGIN_AT_KEY)
    if not isinstance(generation, int) or not isinstance(login_at, int):
        return False  # issued before generations existed, or not by start_session
    lifetime = current_app.permanent_session_lifetime.total_seconds()
    return generation == user.session_generation and time.time() - login_at < lifetime
