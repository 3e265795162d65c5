"""API tokens: made on the settings page, shown once, stored hashed, revocable, and
accepted instead of a session (and instead of CSRF) on every route."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.accounts.models import ApiToken
from app.chat.models import Conversation
from tests.factories import add_conversation, add_token
from tests.web.helpers import (
    alerts,
    bearer,
    count,
    database,
    fetch,
    json_error,
    redirect_path,
    sha256,
    snapshot,
)

HTMX = {"HX-Request": "true"}


def create_token(client, auth, name="deploy script", scopes=("read", "chat"), expires=""):
    data = {"name": name, "expires": expires, **{f"scope_{s}": "y" for s in scopes}}
    return client.post("/settings/tokens", data=data, headers={**HTMX, **auth.headers()})


def raw_token_from(response) -> str:
    match = re.search(
        r'<code class="secret" id="new-token">([^<]+)</code>', response.get_data(as_text=True)
    )
    assert match, response.get_data(as_text=True)
    return match.group(1)


def token_for(app, raw: str) -> ApiToken:
    with database(app).session() as session:
        return session.scalars(select(ApiToken).where(ApiToken.token_hash == sha256(raw))).one()


def test_settings_page_without_tokens(client, user):
    response = client.get("/settings")
    assert response.status_code == 200
    assert "No tokens yet." in response.get_data(as_text=True)


def test_create_token_shows_it_once_and_stores_only_its_hash(app, client, auth, user):
    response = create_token(client, auth)
    assert response.status_code == 201
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith('<div id="tokens">')  # the partial htmx swaps in
    raw = raw_token_from(response)
    assert "deploy script" in html

    with database(app).session() as session:
        token = session.scalars(select(ApiToken)).one()
    assert token.user_id == user
    assert token.token_hash == sha256(raw)
    assert token.revoked_at is None
    assert raw not in repr(snapshot(app))

    page = client.get("/settings").get_data(as_text=True)
    assert "deploy script" in page
    assert raw not in page


@pytest.mark.parametrize(
    "data",
    [{"name": ""}, {"name": "   "}, {}, {"name": "x" * 81}],
    ids=["empty", "blank", "missing", "too-long"],
)
def test_create_token_with_bad_name_saves_nothing(app, client, auth, user, data):
    response = client.post("/settings/tokens", data=data, headers={**HTMX, **auth.headers()})
    assert response.status_code == 400
    assert alerts(response)
    assert 'id="new-token"' not in response.get_data(as_text=True)
    assert count(app, ApiToken) == 0


def test_create_token_without_csrf_token_saves_nothing(app, client, user):
    response = client.post("/settings/tokens", data={"name": "sneaky"}, headers=HTMX)
    assert response.status_code == 400
    assert count(app, ApiToken) == 0


def test_token_works_on_the_api_without_csrf(app, client, auth, user, bob):
    raw = raw_token_from(create_token(client, auth))
    script = app.test_client()  # no cookies: only the token

    response = script.post("/api/chats", json={"title": "From a script"}, headers=bearer(raw))
    assert response.status_code == 201
    chat = fetch(app, Conversation, response.get_json()["id"])
    assert (chat.user_id, chat.title) == (user, "From a script")

    listed = script.get("/api/chats", headers=bearer(raw))
    assert listed.status_code == 200
    assert [c["title"] for c in listed.get_json()["chats"]] == ["From a script"]
    assert token_for(app, raw).last_used_at is not None

    # The token acts as its owner only.
    response = script.get(f"/api/chats/{bob['conversation']}/messages", headers=bearer(raw))
    assert json_error(response, 404) == "NOT_FOUND"


def test_token_works_on_pages(app, user):
    _, raw = add_token(app, user)
    script = app.test_client()
    response = script.get("/", headers=bearer(raw))
    assert response.status_code == 200
    assert "Start your first chat" in response.get_data(as_text=True)
    assert script.get("/settings", headers=bearer(raw)).status_code == 200
    # Without the header the same client is a stranger.
    assert redirect_path(script.get("/")) == "/login"


def test_token_works_on_browser_forms_without_csrf(app, user):
    """docs/CONTRACT.md: a bearer token works on every route a browser can reach."""
    _, raw = add_token(app, user)
    chat = add_conversation(app, user, "Old title")
    script = app.test_client()
    response = script.post(f"/chats/{chat}/rename", data={"title": "Renamed"}, headers=bearer(raw))
    assert redirect_path(response) == f"/chats/{chat}"
    assert fetch(app, Conversation, chat).title == "Renamed"
    response = script.post("/chats/start", data={"message": "Hi"}, headers=bearer(raw))
    assert redirect_path(response).startswith("/chats/")
    assert count(app, Conversation, Conversation.user_id == user) == 2


def test_revoked_token_gets_401(app, client, auth, user):
    raw = raw_token_from(create_token(client, auth))
    token_id = token_for(app, raw).id
    script = app.test_client()
    assert script.get("/api/chats", headers=bearer(raw)).status_code == 200

    response = client.post(
        f"/settings/tokens/{token_id}/revoke", headers={**HTMX, **auth.headers()}
    )
    assert response.status_code == 200
    assert f'<tr id="token-{token_id}" class="revoked">' in response.get_data(as_text=True)
    assert fetch(app, ApiToken, token_id).revoked_at is not None

    assert json_error(script.get("/api/chats", headers=bearer(raw)), 401) == "UNAUTHORIZED"
    response = script.post("/api/chats", json={}, headers=bearer(raw))
    assert json_error(response, 401) == "UNAUTHORIZED"
    assert script.get("/", headers=bearer(raw)).status_code == 401
    assert count(app, Conversation) == 0


def test_revoke_without_csrf_token_keeps_the_token(app, client, user):
    token_id, raw = add_token(app, user)
    response = client.post(f"/settings/tokens/{token_id}/revoke", headers=HTMX)
    assert response.status_code == 400
    assert fetch(app, ApiToken, token_id).revoked_at is None
    assert app.test_client().get("/api/chats", headers=bearer(raw)).status_code == 200


def test_revoke_someone_elses_token_is_404(app, client, auth, user, bob):
    before = snapshot(app)
    response = client.post(
        f"/settings/tokens/{bob['token']}/revoke", headers={**HTMX, **auth.headers()}
    )
    assert response.status_code == 404
    assert snapshot(app) == before
    assert app.test_client().get("/api/chats", headers=bearer(bob["raw_token"])).status_code == 200


def test_settings_page_lists_only_your_tokens(client, user, bob):
    assert "bob&#39;s script" not in client.get("/settings").get_data(as_text=True)


@pytest.mark.parametrize(
    "raw",
    ["garbage", "ld_" + "A" * 43, "ld_\u00e9t\u00e9"],
    ids=["garbage", "lookalike", "non-ascii"],
)
def test_garbage_tokens_get_401(app, user, raw):
    script = app.test_client()
    headers = {"Authorization": f"Bearer {raw}".encode().decode("latin-1")}
    response = script.get("/api/chats", headers=headers)
    assert json_error(response, 401) == "UNAUTHORIZED"
    response = script.post("/api/chats", json={}, headers=headers)
    assert json_error(response, 401) == "UNAUTHORIZED"
    assert count(app, Conversation) == 0
