"""Presets over the JSON API: a person's own are theirs alone (404 for anyone else), the
admin's are read by everyone and changed by admins only (403), bad input is refused with a
clear code and saves nothing, and a chat started from one keeps it until it is deleted."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.chat.models import Conversation
from app.chat.preset_models import Preset
from tests.factories import add_token, add_user


def _as(raw_token: str) -> dict:
    return {"headers": {"Authorization": f"Bearer {raw_token}"}}


@pytest.fixture
def people(app):
    admin = add_user(app, "admin@example.com", admin=True)
    ada = add_user(app, "ada@example.com")
    bob = add_user(app, "bob@example.com")
    return {
        "admin": _as(add_token(app, admin, scopes=("read", "chat", "admin"))[1]),
        "ada": _as(add_token(app, ada)[1]),
        "bob": _as(add_token(app, bob)[1]),
    }


def _count(app) -> int:
    with app.extensions["database"].session() as session:
        return session.scalar(select(func.count()).select_from(Preset))


def test_a_person_saves_reads_changes_and_deletes_their_own_preset(app, client, people):
    listed = client.get("/api/presets", **people["ada"]).get_json()
    assert listed["presets"] == []
    keys = [group["key"] for group in listed["tool_groups"]]
    assert {"workspace", "writing", "images", "campaigns", "mcp"} <= set(keys)
    assert "always" not in keys  # questions are never turned off

    body = {
        "name": "  Blog   writer ",
        "instructions": "Write for engineers.",
        "tool_groups": ["writing", "workspace", "writing"],
        "starters": ["Draft a post about our launch", "  ", "Outline a series"],
    }
    made = client.post("/api/presets", json=body, **people["ada"])
    assert made.status_code == 201, made.get_json()
    preset = made.get_json()
    assert preset["name"] == "Blog writer" and preset["shared"] is False
    assert preset["tool_groups"] == [k for k in keys if k in ("writing", "workspace")]
    assert preset["starters"] == ["Draft a post about our launch", "Outline a series"]
    assert preset["model"] == ""

    url = f"/api/presets/{preset['id']}"
    assert client.get(url, **people["ada"]).get_json() == preset
    host_model = app.extensions["services"].settings.host_model_name
    changed = client.patch(url, json={"starters": [], "model": host_model}, **people["ada"])
    assert changed.status_code == 200, changed.get_json()
    assert changed.get_json()["starters"] == [] and changed.get_json()["name"] == "Blog writer"
    assert changed.get_json()["model"] == host_model

    # Bob sees no trace of it, whatever he tries.
    for method in ("get", "patch", "delete"):
        answer = getattr(client, method)(url, json={"name": "Mine"}, **people["bob"])
        assert answer.status_code == 404, method
    assert client.get("/api/presets", **people["bob"]).get_json()["presets"] == []

    assert client.delete(url, **people["ada"]).status_code == 204
    assert client.get(url, **people["ada"]).status_code == 404


def test_the_admins_presets_are_everyones_to_read_and_admins_to_change(client, people):
    refused = client.post("/api/presets", json={"name": "Team", "shared": True}, **people["ada"])
    assert refused.status_code == 403
    assert refused.get_json()["error"]["code"] == "FORBIDDEN"

    made = client.post(
        "/api/presets", json={"name": "Team", "shared": True, "tool_groups": []}, **people["admin"]
    )
    assert made.status_code == 201
    shared = made.get_json()
    assert shared["shared"] is True and shared["tool_groups"] == []
    url = f"/api/presets/{shared['id']}"

    own = client.post("/api/presets", json={"name": "Team"}, **people["ada"])
    assert own.status_code == 201  # a person's own name may match one for everyone
    names = [
        (p["name"], p["shared"])
        for p in client.get("/api/presets", **people["ada"]).get_json()["presets"]
    ]
    assert names == [("Team", False), ("Team", True)]  # their own first

    assert client.get(url, **people["bob"]).get_json()["name"] == "Team"
    for method in ("patch", "delete"):
        answer = getattr(client, method)(url, json={"name": "Ours"}, **people["bob"])
        assert answer.status_code == 403, method
        assert answer.get_json()["error"]["code"] == "FORBIDDEN"
    assert client.patch(url, json={"name": "Ours"}, **people["admin"]).status_code == 200
    assert client.delete(url, **people["admin"]).status_code == 204


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"name": "   "}, "PRESET_REFUSED", "name"),
        ({"name": "Taken"}, "PRESET_REFUSED", "name"),
        ({"name": "x", "tool_groups": ["writing", "teleport"]}, "PRESET_REFUSED", "tool_groups"),
        ({"name": "x", "model": "gpt-nine"}, "PRESET_REFUSED", "model"),
        ({"name": "x", "starters": ["a", "b", "c", "d", "e"]}, "INVALID_FIELD", "starters"),
        ({"name": "x", "starters": ["long " * 50]}, "INVALID_FIELD", "starters.0"),
        ({"name": "x" * 61}, "INVALID_FIELD", "name"),
        ({"name": "x", "tool_groups": "writing"}, "INVALID_FIELD", "tool_groups"),
        ({"name": "x", "colour": "red"}, "INVALID_FIELD", "colour"),
    ],
)
def test_bad_input_is_refused_clearly_and_saves_nothing(app, client, people, body, code, field):
    assert client.post("/api/presets", json={"name": "Taken"}, **people["ada"]).status_code == 201
    before = _count(app)
    answer = client.post("/api/presets", json=body, **people["ada"])
    assert answer.status_code == 400, answer.get_json()
    error = answer.get_json()["error"]
    assert (error["code"], error.get("field")) == (code, field), error
    assert _count(app) == before


def test_a_refused_change_leaves_the_preset_as_it_was(client, people):
    made = client.post(
        "/api/presets", json={"name": "Plain", "starters": ["Hi"]}, **people["ada"]
    ).get_json()
    url = f"/api/presets/{made['id']}"
    answer = client.patch(url, json={"starters": ["New"], "tool_groups": ["nope"]}, **people["ada"])
    assert answer.status_code == 400
    assert answer.get_json()["error"]["field"] == "tool_groups"
    assert client.get(url, **people["ada"]).get_json() == made


def test_a_chat_keeps_its_preset_until_the_preset_is_deleted(app, client, people):
    shared = client.post(
        "/api/presets", json={"name": "Team", "shared": True}, **people["admin"]
    ).get_json()
    bobs = client.post("/api/presets", json={"name": "Bob's"}, **people["bob"]).get_json()

    assert (
        client.post("/api/chats", json={"preset_id": bobs["id"]}, **people["ada"]).status_code
        == 404
    )
    made = client.post("/api/chats", json={"preset_id": shared["id"]}, **people["ada"])
    assert made.status_code == 201
    chat_id = made.get_json()["id"]
    chats = client.get("/api/chats", **people["ada"]).get_json()["chats"]
    assert [(c["id"], c["preset_id"]) for c in chats] == [(chat_id, shared["id"])]

    assert client.delete(f"/api/presets/{shared['id']}", **people["admin"]).status_code == 204
    with app.extensions["database"].session() as session:
        chat = session.get(Conversation, chat_id)
        assert chat is not None and chat.preset_id is None  # the chat goes on without it
