"""A turn's request signs in with the turn's own first read (app/web/identity.py): the same
refusals as every other request, with the same statuses, on the API's loop route and the
page's composer."""

from __future__ import annotations

from datetime import timedelta

from app.accounts.models import ApiToken
from app.db import utcnow
from tests.factories import add_conversation, add_token, csrf_token_from
from tests.web.helpers import assert_redirects_to_login, bearer, fetch, json_error

MESSAGE = {"message": "hello"}


def _revoke(app, token_id: int) -> None:
    with app.extensions["database"].session() as session:
        session.get(ApiToken, token_id).revoked_at = utcnow()
        session.commit()


def test_a_revoked_or_expired_token_cannot_start_a_turn(app, user):
    chat = add_conversation(app, user)
    revoked_id, revoked = add_token(app, user, "revoked")
    _revoke(app, revoked_id)
    _, expired = add_token(app, user, "expired", expires_at=utcnow() - timedelta(minutes=1))
    script = app.test_client()
    for raw in (revoked, expired, "not-a-token"):
        response = script.post(f"/api/chats/{chat}/loop", json=MESSAGE, headers=bearer(raw))
        assert json_error(response, 401) == "UNAUTHORIZED"
        response = script.post(f"/chats/{chat}/messages", data=MESSAGE, headers=bearer(raw))
        assert response.status_code in (302, 401)
        assert response.status_code == 401 or "/login" in response.headers["Location"]


def test_a_token_cannot_start_a_turn_in_another_persons_chat(app, user, bob):
    script = app.test_client()
    _, raw = add_token(app, user)
    response = script.post(
        f"/api/chats/{bob['conversation']}/loop", json=MESSAGE, headers=bearer(raw)
    )
    assert json_error(response, 404) == "NOT_FOUND"
    # ...nor in a chat that is not there, and it still signs in elsewhere.
    response = script.post("/api/chats/999/loop", json=MESSAGE, headers=bearer(raw))
    assert json_error(response, 404) == "NOT_FOUND"
    assert script.get("/api/chats", headers=bearer(raw)).status_code == 200


def test_a_token_without_the_chat_scope_is_refused_a_turn(app, user):
    chat = add_conversation(app, user)
    _, raw = add_token(app, user, scopes=("read",))
    response = app.test_client().post(f"/api/chats/{chat}/loop", json=MESSAGE, headers=bearer(raw))
    assert json_error(response, 403) == "INSUFFICIENT_SCOPE"


def test_a_token_that_starts_a_turn_is_marked_used(app, user):
    chat = add_conversation(app, user)
    token_id, raw = add_token(app, user)
    response = app.test_client().post(f"/api/chats/{chat}/loop", json=MESSAGE, headers=bearer(raw))
    assert response.status_code == 202
    assert fetch(app, ApiToken, token_id).last_used_at is not None


def test_an_ended_session_cannot_start_a_turn(app, client, auth, user):
    chat = add_conversation(app, user)
    page = client.get(f"/chats/{chat}").get_data(as_text=True)
    csrf = csrf_token_from(page)
    copied = client.get_cookie("session").value
    auth.logout()
    response = _replay(app, copied).post(
        f"/api/chats/{chat}/loop", json=MESSAGE, headers={"X-CSRFToken": csrf}
    )
    assert json_error(response, 401) == "UNAUTHORIZED"
    assert_redirects_to_login(
        _replay(app, copied).post(f"/chats/{chat}/messages", data={**MESSAGE, "csrf_token": csrf})
    )


def _replay(app, cookie: str):
    """A browser holding a copy of the cookie (a refused one clears its own copy)."""
    thief = app.test_client()
    thief.set_cookie("session", cookie)
    return thief


def test_a_session_cannot_start_a_turn_in_another_persons_chat(app, client, user, bob):
    page = client.get("/").get_data(as_text=True)
    csrf = csrf_token_from(page)
    response = client.post(
        f"/api/chats/{bob['conversation']}/loop", json=MESSAGE, headers={"X-CSRFToken": csrf}
    )
    assert json_error(response, 404) == "NOT_FOUND"
    assert client.get("/api/chats").status_code == 200  # still signed in
