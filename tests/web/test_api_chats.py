"""The JSON API for chats (docs/CONTRACT.md): create, list, read messages."""

from __future__ import annotations

import pytest

from app.chat.models import Conversation
from app.chat.rows import insert_message
from tests.factories import add_conversation, add_token
from tests.web.helpers import count, database, fetch, json_error, snapshot


@pytest.fixture
def api(app, user):
    """A script's client: Ada's bearer token, no cookies."""
    _, raw = add_token(app, user)
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {raw}"
    return client


# POST /api/chats


def test_create_chat_with_a_title(app, api, user):
    response = api.post("/api/chats", json={"title": "Spring launch"})
    assert response.status_code == 201
    body = response.get_json()
    assert set(body) == {"id"}
    chat = fetch(app, Conversation, body["id"])
    assert (chat.user_id, chat.title, chat.status) == (user, "Spring launch", "IDLE")


@pytest.mark.parametrize(
    "kwargs", [{}, {"json": {}}, {"json": {"title": None}}], ids=["no-body", "empty", "null"]
)
def test_create_chat_without_a_title(app, api, kwargs):
    response = api.post("/api/chats", **kwargs)
    assert response.status_code == 201
    assert fetch(app, Conversation, response.get_json()["id"]).title == "New chat"


def test_create_chat_accepts_a_120_character_title(app, api):
    response = api.post("/api/chats", json={"title": "x" * 120})
    assert response.status_code == 201
    assert fetch(app, Conversation, response.get_json()["id"]).title == "x" * 120


def test_create_chat_from_the_browser_with_csrf_header(app, client, auth, user):
    response = client.post("/api/chats", json={"title": "Browser"}, headers=auth.headers())
    assert response.status_code == 201
    assert count(app, Conversation, Conversation.user_id == user) == 1


@pytest.mark.parametrize(
    "title",
    [5, 1.5, True, ["a"], {"text": "a"}, "x" * 121],
    ids=["int", "float", "bool", "list", "object", "too-long"],
)
def test_create_chat_with_a_bad_title_is_400(app, api, title):
    response = api.post("/api/chats", json={"title": title})
    assert json_error(response, 400) == "INVALID_FIELD"
    assert "title" in response.get_json()["error"]["message"]
    assert count(app, Conversation) == 0


@pytest.mark.parametrize(
    "body",
    ["{", '{"title": "a",}', "[1, 2]", '"just a string"', "null"],
    ids=["truncated", "trailing-comma", "array", "string", "null"],
)
def test_create_chat_with_invalid_json_is_400(app, api, body):
    response = api.post("/api/chats", data=body, content_type="application/json")
    assert json_error(response, 400) == "INVALID_JSON"
    assert count(app, Conversation) == 0


@pytest.mark.parametrize(
    ("body", "content_type"),
    [("title=hello", "application/x-www-form-urlencoded"), ('{"title": "hello"}', "text/plain")],
    ids=["form", "text"],
)
def test_create_chat_with_a_non_json_body_is_415(app, api, body, content_type):
    response = api.post("/api/chats", data=body, content_type=content_type)
    assert json_error(response, 415) == "UNSUPPORTED_MEDIA_TYPE"
    assert count(app, Conversation) == 0


# GET /api/chats


def test_list_chats_shows_only_the_callers(app, api, user, bob):
    first = add_conversation(app, user, "First")
    second = add_conversation(app, user, "Second")
    response = api.get("/api/chats")
    assert response.status_code == 200
    chats = response.get_json()["chats"]
    assert {chat["id"] for chat in chats} == {first, second}
    assert {chat["title"] for chat in chats} == {"First", "Second"}
    for chat in chats:
        assert set(chat) == {
            "id",
            "title",
            "status",
            "updated_at",
            "pinned",
            "archived",
            "folder",
            "project_id",
            "model",
            "unread",
            "preset_id",
        }
        assert (chat["status"], chat["pinned"], chat["archived"], chat["folder"]) == (
            "IDLE",
            False,
            False,
            None,
        )
        assert chat["updated_at"].endswith("Z")


def test_list_chats_when_there_are_none(api, bob):
    assert api.get("/api/chats").get_json() == {"chats": []}


# GET /api/chats/<id>/messages


@pytest.fixture
def chat_with_rows(app, user):
    conversation_id = add_conversation(app, user, "With rows")
    with database(app).session() as session:
        insert_message(session, conversation_id, role="user", kind="user", content="Hello")
        insert_message(
            session,
            conversation_id,
            role="assistant",
            kind="host",
            content="internal",
            meta={"hidden": True},
        )
        insert_message(
            session,
            conversation_id,
            role="assistant",
            kind="card",
            content="Pick one",
            meta={"card": {"toolUseId": "tu_1", "tool": "select_offer", "status": "awaiting"}},
        )
        insert_message(session, conversation_id, role="assistant", kind="host", content="Thanks")
        session.commit()
    return conversation_id


def test_messages_in_sequence_without_hidden_rows(api, chat_with_rows):
    response = api.get(f"/api/chats/{chat_with_rows}/messages")
    assert response.status_code == 200
    rows = response.get_json()["messages"]
    assert [(row["sequence"], row["content"]) for row in rows] == [
        (1, "Hello"),
        (3, "Pick one"),
        (4, "Thanks"),
    ]
    assert {"id", "sequence", "role", "kind", "content", "created_at"} <= set(rows[0])
    assert "card" not in rows[0]
    assert rows[1]["card"] == {"toolUseId": "tu_1", "tool": "select_offer", "status": "awaiting"}
    assert [row["kind"] for row in rows] == ["user", "card", "host"]


def test_messages_after_a_sequence(api, chat_with_rows):
    rows = api.get(f"/api/chats/{chat_with_rows}/messages?after=1").get_json()["messages"]
    assert [row["sequence"] for row in rows] == [3, 4]
    assert api.get(f"/api/chats/{chat_with_rows}/messages?after=4").get_json() == {"messages": []}


def test_messages_of_an_empty_chat(app, api, user):
    chat = add_conversation(app, user)
    assert api.get(f"/api/chats/{chat}/messages").get_json() == {"messages": []}


@pytest.mark.parametrize("after", ["abc", "-1", "1.5", "", " 1"])
def test_messages_with_a_bad_after_is_400(api, chat_with_rows, after):
    response = api.get(f"/api/chats/{chat_with_rows}/messages", query_string={"after": after})
    assert json_error(response, 400) == "INVALID_FIELD"
    assert "after" in response.get_json()["error"]["message"]


@pytest.mark.parametrize("after", ["\u00b2", "9" * 30], ids=["superscript-two", "huge"])
def test_messages_with_an_unusual_number_is_400_not_500(api, chat_with_rows, after):
    response = api.get(f"/api/chats/{chat_with_rows}/messages", query_string={"after": after})
    assert json_error(response, 400) == "INVALID_FIELD"


def test_messages_of_someone_elses_chat_is_404(app, api, bob):
    before = snapshot(app)
    response = api.get(f"/api/chats/{bob['conversation']}/messages")
    assert json_error(response, 404) == "NOT_FOUND"
    assert response.get_json() == api.get("/api/chats/999/messages").get_json()
    assert snapshot(app) == before
