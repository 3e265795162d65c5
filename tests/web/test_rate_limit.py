"""The per-person message limit: the 41st message in the window is 429 with Retry-After."""

from __future__ import annotations

import pytest

from app.chat.conversations import create_conversation


@pytest.fixture
def app(make_app):
    return make_app(rate_limit_messages="3 per 10 minutes")


def _chat(app, user_id):
    with app.extensions["database"].session() as session:
        conversation = create_conversation(session, user_id)
        session.commit()
        return conversation.id


def test_messages_past_the_limit_get_429_with_retry_after(app, client, auth):
    user_id = auth.create()
    auth.login()
    chats = [_chat(app, user_id) for _ in range(4)]
    # Each message goes to its own chat so only the limit (not a run in flight) can refuse.
    for chat_id in chats[:3]:
        response = client.post(
            f"/api/chats/{chat_id}/loop", json={"message": "hi"}, headers=auth.headers()
        )
        assert response.status_code == 202
    refused = client.post(
        f"/api/chats/{chats[3]}/loop", json={"message": "hi"}, headers=auth.headers()
    )
    assert refused.status_code == 429
    assert refused.get_json()["error"]["code"] == "RATE_LIMITED"
    assert 0 < int(refused.headers["Retry-After"]) <= 600


def test_the_page_composer_shares_the_limit_and_shows_a_banner(app, client, auth):
    user_id = auth.create()
    auth.login()
    chats = [_chat(app, user_id) for _ in range(4)]
    for chat_id in chats[:3]:
        assert (
            client.post(
                f"/api/chats/{chat_id}/loop", json={"message": "hi"}, headers=auth.headers()
            ).status_code
            == 202
        )
    response = client.post(
        f"/chats/{chats[3]}/messages",
        data={"message": "one more", "csrf_token": auth.csrf},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 429
    assert response.headers["HX-Retarget"] == "#banner"
    assert "Too many messages" in response.get_data(as_text=True)
    assert int(response.headers["Retry-After"]) > 0


def test_limits_are_per_person(app, client, auth):
    ada = auth.create()
    auth.login()
    for chat_id in [_chat(app, ada) for _ in range(3)]:
        client.post(f"/api/chats/{chat_id}/loop", json={"message": "hi"}, headers=auth.headers())
    from tests.factories import AuthActions

    bob_client = app.test_client()
    bob = AuthActions(app, bob_client)
    bob_id = bob.create("bob@example.com")
    bob.login("bob@example.com")
    response = bob_client.post(
        f"/api/chats/{_chat(app, bob_id)}/loop", json={"message": "hi"}, headers=bob.headers()
    )
    assert response.status_code == 202
