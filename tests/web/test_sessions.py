"""Sessions the server can end (docs/security.md): a copied cookie stops working after
logout, a new password and "log out everywhere"; a login lasts SESSION_LIFETIME_DAYS; a
login starts a fresh session with a new CSRF token."""

from __future__ import annotations

import time

from app.accounts.models import User
from tests.factories import PASSWORD, add_conversation, add_user, csrf_token_from
from tests.web.helpers import (
    anonymous_csrf,
    assert_redirects_to_login,
    fetch,
    json_error,
    redirect_path,
)

HTMX = {"HX-Request": "true"}


def session_cookie(client) -> str:
    cookie = client.get_cookie("session")
    assert cookie is not None
    return cookie.value


def replay(app, cookie: str):
    """A second browser holding a copy of the cookie."""
    thief = app.test_client()
    thief.set_cookie("session", cookie)
    return thief


def assert_ended(app, cookie: str, chat_id: int) -> None:
    thief = replay(app, cookie)
    assert json_error(thief.get("/api/chats"), 401) == "UNAUTHORIZED"
    assert_redirects_to_login(thief.get(f"/chats/{chat_id}"))
    assert_redirects_to_login(thief.get("/settings"))


def test_a_copied_cookie_works_while_the_session_lasts(app, client, user):
    chat = add_conversation(app, user, "Mine")
    thief = replay(app, session_cookie(client))
    assert thief.get("/api/chats").status_code == 200
    assert thief.get(f"/chats/{chat}").status_code == 200


def test_a_copied_cookie_stops_working_after_logout(app, client, auth, user):
    chat = add_conversation(app, user, "Mine")
    copied = session_cookie(client)
    assert_redirects_to_login(auth.logout())
    assert_ended(app, copied, chat)
    # Logging in again works, and the old copy stays dead.
    auth.login()
    assert client.get("/api/chats").status_code == 200
    assert_ended(app, copied, chat)


def change_password(client, auth, new="a brand new passphrase", current=PASSWORD):
    return client.post(
        "/settings/password",
        data={"current_password": current, "new_password": new, "confirm": new},
        headers={**HTMX, **auth.headers()},
    )


def test_a_copied_cookie_stops_working_after_a_password_change(app, client, auth, user):
    chat = add_conversation(app, user, "Mine")
    copied = session_cookie(client)
    response = change_password(client, auth)
    assert response.status_code == 200
    assert "Password changed." in response.get_data(as_text=True)
    assert_ended(app, copied, chat)
    # The browser that changed it stays logged in.
    assert client.get("/api/chats").status_code == 200
    assert client.get(f"/chats/{chat}").status_code == 200


def test_a_wrong_current_password_ends_nothing(app, client, auth, user):
    copied = session_cookie(client)
    response = change_password(client, auth, current="not my password")
    assert response.status_code == 400
    assert replay(app, copied).get("/api/chats").status_code == 200


def test_a_new_password_must_not_be_a_common_one(app, client, auth, user):
    response = change_password(client, auth, new="password123")
    assert response.status_code == 400
    assert fetch(app, User, user).check_password(PASSWORD)


def test_log_out_everywhere_ends_every_session(app, client, auth, user):
    chat = add_conversation(app, user, "Mine")
    other_device = app.test_client()
    other_device.environ_base["REMOTE_ADDR"] = "10.0.0.7"
    token = csrf_token_from(other_device.get("/login").get_data(as_text=True))
    other_device.post(
        "/login", data={"email": "ada@example.com", "password": PASSWORD, "csrf_token": token}
    )
    other = session_cookie(other_device)
    assert other_device.get("/api/chats").status_code == 200
    this = session_cookie(client)

    page = client.get("/settings").get_data(as_text=True)
    assert 'action="/settings/sessions/end"' in page and "Log out everywhere" in page
    response = client.post("/settings/sessions/end", data={"csrf_token": auth.csrf})
    assert redirect_path(response) == "/login"
    assert "logged out everywhere" in client.get("/login").get_data(as_text=True)
    for cookie in (this, other):
        assert_ended(app, cookie, chat)
    assert_redirects_to_login(client.get("/settings"))


def test_log_out_everywhere_needs_the_csrf_token(app, client, user):
    copied = session_cookie(client)
    assert client.post("/settings/sessions/end").status_code == 400
    assert replay(app, copied).get("/api/chats").status_code == 200


def test_one_persons_logout_leaves_anothers_sessions(app, client, auth, user):
    add_user(app, "bob@example.com")
    bob = app.test_client()
    token = anonymous_csrf(bob)
    bob.post("/login", data={"email": "bob@example.com", "password": PASSWORD, "csrf_token": token})
    auth.logout()
    assert bob.get("/api/chats").status_code == 200


def test_a_login_older_than_the_lifetime_is_over(make_app):
    app = make_app(session_lifetime_days=3)
    client = app.test_client()
    add_user(app, "ada@example.com")
    token = anonymous_csrf(client)
    client.post(
        "/login", data={"email": "ada@example.com", "password": PASSWORD, "csrf_token": token}
    )
    cookie = client.get_cookie("session")
    # The browser keeps the cookie for the lifetime (not only until it closes).
    assert cookie.max_age is None or cookie.max_age <= 3 * 86400
    assert cookie.expires is not None
    assert 2.9 * 86400 < cookie.expires.timestamp() - time.time() <= 3 * 86400 + 5
    assert client.get("/api/chats").status_code == 200
    with client.session_transaction() as session:
        session["_login_at"] -= 3 * 86400 + 1  # the login happened just over 3 days ago
    assert json_error(client.get("/api/chats"), 401) == "UNAUTHORIZED"
    assert_redirects_to_login(client.get("/settings"))


def test_the_default_lifetime_is_fourteen_days(app):
    assert app.config["LOOPDESK"].session_lifetime_days == 14
    assert app.permanent_session_lifetime.days == 14


def test_a_cookie_without_a_generation_is_not_a_session(app, client, user):
    """Cookies from before sessions could end (or made by hand with a stolen key) name no
    generation: they count for nothing."""
    with client.session_transaction() as session:
        del session["_generation"]
    assert_redirects_to_login(client.get("/settings"))


def test_login_rotates_the_csrf_token(app, client, auth):
    auth.create()
    before = anonymous_csrf(client)
    client.post(
        "/login", data={"email": "ada@example.com", "password": PASSWORD, "csrf_token": before}
    )
    after = csrf_token_from(client.get("/settings").get_data(as_text=True))
    assert after != before
    # The token handed out before the login is no good after it.
    chat = add_conversation(app, fetch_user_id(app), "Old")
    response = client.post(f"/chats/{chat}/rename", data={"title": "New", "csrf_token": before})
    assert response.status_code == 400
    response = client.post(f"/chats/{chat}/rename", data={"title": "New", "csrf_token": after})
    assert redirect_path(response) == f"/chats/{chat}"


def fetch_user_id(app, email="ada@example.com") -> int:
    from sqlalchemy import select

    with app.extensions["database"].session() as session:
        return session.scalar(select(User.id).where(User.email == email))


def test_login_does_not_keep_what_the_session_held_before(app, client, auth):
    """No session fixation: what a planted pre-login session carried is gone after login."""
    auth.create()
    with client.session_transaction() as session:
        session["planted"] = "by someone else"
    auth.login()
    with client.session_transaction() as session:
        assert "planted" not in session


def test_the_cookie_is_secure_when_the_public_url_is_https(make_app):
    app = make_app(public_url="https://chat.example.com")
    assert "Secure" in _set_cookie(app.test_client())


def test_session_cookie_secure_setting_wins(make_app):
    app = make_app(public_url="https://chat.example.com", session_cookie_secure=False)
    assert "Secure" not in _set_cookie(app.test_client())
    app = make_app(session_cookie_secure=True)
    assert "Secure" in _set_cookie(app.test_client())


def test_the_cookie_is_not_secure_over_plain_http_by_default(app, client):
    assert "Secure" not in _set_cookie(client)


def _set_cookie(client) -> str:
    response = client.get("/login")
    return response.headers.get("Set-Cookie", "")
