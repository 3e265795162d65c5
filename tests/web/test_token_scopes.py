"""Bearer token scopes (read, chat, admin) and expiry; a token never mints tokens or does
what needs a browser session (docs/CONTRACT.md, docs/security.md)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from app.accounts.models import ApiToken
from app.chat.models import Conversation
from app.db import utcnow
from tests.factories import PASSWORD, add_conversation, add_token, add_user
from tests.web.helpers import bearer, count, fetch, json_error, redirect_path

HTMX = {"HX-Request": "true"}


def script(app):
    return app.test_client()  # no cookies: only the token


@pytest.fixture
def ada(app):
    return add_user(app, "ada@example.com")


def test_a_read_token_reads_and_changes_nothing(app, ada):
    chat = add_conversation(app, ada, "Mine")
    _, raw = add_token(app, ada, scopes=("read",))
    client = script(app)
    assert client.get("/api/chats", headers=bearer(raw)).status_code == 200
    assert client.get(f"/api/chats/{chat}/messages", headers=bearer(raw)).status_code == 200
    assert client.get(f"/chats/{chat}", headers=bearer(raw)).status_code == 200
    for method, url, body in [
        ("post", "/api/chats", {}),
        ("post", f"/api/chats/{chat}/loop", {"message": "hi"}),
        ("post", f"/api/chats/{chat}/stop", None),
    ]:
        response = getattr(client, method)(url, json=body, headers=bearer(raw))
        assert json_error(response, 403) == "INSUFFICIENT_SCOPE"
    response = client.post(f"/chats/{chat}/rename", data={"title": "X"}, headers=bearer(raw))
    assert response.status_code == 403
    assert fetch(app, Conversation, chat).title == "Mine"
    assert count(app, Conversation) == 1


def test_a_chat_token_sends_but_does_not_read(app, ada):
    _, raw = add_token(app, ada, scopes=("chat",))
    client = script(app)
    response = client.post("/api/chats", json={"title": "From a script"}, headers=bearer(raw))
    assert response.status_code == 201
    chat = response.get_json()["id"]
    stopped = client.post(f"/api/chats/{chat}/stop", headers=bearer(raw))
    assert stopped.status_code == 200
    assert json_error(client.get("/api/chats", headers=bearer(raw)), 403) == "INSUFFICIENT_SCOPE"


def test_admin_routes_need_the_admin_scope(app):
    admin = add_user(app, "root@example.com", admin=True)
    _, plain = add_token(app, admin, scopes=("read", "chat"))
    _, full = add_token(app, admin, scopes=("read", "chat", "admin"))
    client = script(app)
    response = client.get("/api/admin/guidelines", headers=bearer(plain))
    assert json_error(response, 403) == "INSUFFICIENT_SCOPE"
    assert client.get("/admin/users", headers=bearer(plain)).status_code == 403
    assert client.get("/api/admin/guidelines", headers=bearer(full)).status_code == 200
    assert client.get("/admin/users", headers=bearer(full)).status_code == 200
    response = client.put("/api/admin/guidelines", json={"rules": []}, headers=bearer(full))
    assert response.status_code == 200


def test_an_admin_scope_on_someone_who_is_not_an_admin_opens_nothing(app, ada):
    """Issued directly (the form refuses it): admin_required still checks the person."""
    _, raw = add_token(app, ada, scopes=("read", "admin"))
    assert script(app).get("/api/admin/guidelines", headers=bearer(raw)).status_code == 403


def test_an_expired_token_is_refused(app, ada):
    _, raw = add_token(app, ada, expires_at=utcnow() - timedelta(seconds=1))
    assert json_error(script(app).get("/api/chats", headers=bearer(raw)), 401) == "UNAUTHORIZED"
    _, later = add_token(app, ada, expires_at=utcnow() + timedelta(days=1))
    assert script(app).get("/api/chats", headers=bearer(later)).status_code == 200


@pytest.mark.parametrize(
    ("method", "url", "data"),
    [
        ("post", "/settings/tokens", {"name": "minted", "scope_read": "y"}),
        ("post", "/settings/tokens/1/revoke", {}),
        (
            "post",
            "/settings/password",
            {"current_password": PASSWORD, "new_password": "x brand new one", "confirm": "x"},
        ),
        ("post", "/settings/sessions/end", {}),
        ("post", "/logout", {}),
    ],
    ids=["mint", "revoke", "password", "sessions", "logout"],
)
def test_a_token_cannot_do_what_needs_a_browser_session(app, ada, method, url, data):
    token_id, raw = add_token(app, ada, scopes=("read", "chat"))
    response = getattr(script(app), method)(url, data=data, headers=bearer(raw))
    assert json_error(response, 403) == "SESSION_REQUIRED"
    assert count(app, ApiToken) == 1
    assert fetch(app, ApiToken, token_id).revoked_at is None
    assert script(app).get("/api/chats", headers=bearer(raw)).status_code == 200


def _raw_token(response) -> str:
    match = re.search(r'<code class="secret" id="new-token">([^<]+)</code>', response.text)
    assert match, response.text
    return match.group(1)


def test_the_settings_page_makes_a_scoped_expiring_token_and_shows_it(app, client, auth, user):
    page = client.get("/settings").get_data(as_text=True)
    assert 'name="scope_read"' in page and 'name="scope_chat"' in page
    assert 'name="scope_admin"' not in page  # not an admin
    response = client.post(
        "/settings/tokens",
        data={"name": "reader", "scope_read": "y", "expires": "7"},
        headers={**HTMX, **auth.headers()},
    )
    assert response.status_code == 201
    raw = _raw_token(response)
    token = fetch(app, ApiToken, 1)
    assert token.scopes == "read"
    assert timedelta(days=6, hours=23) < token.expires_at - utcnow() <= timedelta(days=7)
    row = re.search(r'<tr id="token-1".*?</tr>', client.get("/settings").text, re.S).group(0)
    assert ">read<" in row and token.expires_at.strftime("%Y-%m-%d") in row
    assert json_error(script(app).post("/api/chats", headers=bearer(raw)), 403)


@pytest.mark.parametrize(
    "data",
    [
        {"name": "none"},
        {"name": "bad expiry", "scope_read": "y", "expires": "9999"},
        {"name": "sneaky", "scope_admin": "y"},
    ],
    ids=["no-scope", "bad-expiry", "admin-for-non-admin"],
)
def test_bad_token_forms_make_nothing(app, client, auth, user, data):
    response = client.post("/settings/tokens", data=data, headers={**HTMX, **auth.headers()})
    assert response.status_code == 400
    assert 'role="alert"' in response.text
    assert count(app, ApiToken) == 0


def test_an_admin_can_make_an_admin_token(app, client, auth):
    auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    assert 'name="scope_admin"' in client.get("/settings").text
    response = client.post(
        "/settings/tokens",
        data={"name": "ops", "scope_read": "y", "scope_admin": "y"},
        headers={**HTMX, **auth.headers()},
    )
    assert response.status_code == 201
    raw = _raw_token(response)
    assert script(app).get("/api/admin/guidelines", headers=bearer(raw)).status_code == 200
    assert fetch(app, ApiToken, 1).expires_at is None


def test_a_token_on_a_page_form_needs_chat(app, ada):
    chat = add_conversation(app, ada, "Old")
    _, raw = add_token(app, ada, scopes=("chat",))
    response = script(app).post(f"/chats/{chat}/rename", data={"title": "New"}, headers=bearer(raw))
    assert redirect_path(response) == f"/chats/{chat}"
    assert fetch(app, Conversation, chat).title == "New"
