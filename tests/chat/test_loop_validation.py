"""Malformed loop requests get a 4xx with the JSON error shape and change nothing."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from app.chat.models import Conversation, Message, Run

LONG = "x" * 100_001  # one over MAX_MESSAGE_CHARS

JSON_BODIES = [
    ({}, 400),
    ([], 400),
    ("hello", 400),
    (42, 400),
    (None, 400),
    ({"message": "hi", "toolResponse": {"toolUseId": "t", "result": {}}}, 400),
    ({"message": "hi", "extra": 1}, 400),
    ({"msg": "hi"}, 400),
    ({"message": 5}, 400),
    ({"message": ["hi"]}, 400),
    ({"message": {"text": "hi"}}, 400),
    ({"message": None}, 400),
    ({"message": True}, 400),
    ({"message": ""}, 400),
    ({"message": "   \n\t "}, 400),
    ({"message": LONG}, 413),
    ({"toolResponse": "yes"}, 400),
    ({"toolResponse": []}, 400),
    ({"toolResponse": None}, 400),
    ({"toolResponse": {}}, 400),
    ({"toolResponse": {"result": {}}}, 400),
    ({"toolResponse": {"toolUseId": "toolu_1"}}, 400),
    ({"toolResponse": {"toolUseId": 7, "result": {}}}, 400),
    ({"toolResponse": {"toolUseId": "", "result": {}}}, 400),
    ({"toolResponse": {"toolUseId": "t" * 201, "result": {}}}, 400),
    ({"toolResponse": {"toolUseId": "toolu_1", "result": []}}, 400),
    ({"toolResponse": {"toolUseId": "toolu_1", "result": "ok"}}, 400),
    ({"toolResponse": {"toolUseId": "toolu_1", "result": None}}, 400),
    ({"toolResponse": {"toolUseId": "toolu_1", "result": {}, "more": 1}}, 400),
    ({"toolResponse": {"toolUseId": "toolu_1", "result": {"text": LONG}}}, 413),
    ({"toolResponse": {"toolUseId": "toolu_unknown", "result": {"value": "a"}}}, 409),
]


def _snapshot(app):
    with app.extensions["database"].session() as session:
        return (
            session.scalar(select(func.count()).select_from(Message)),
            session.scalar(select(func.count()).select_from(Run)),
            [(c.id, c.status, c.title) for c in session.scalars(select(Conversation))],
        )


@pytest.fixture
def chat_id(chat):
    return chat.new_chat()


def _assert_error_shape(response, status):
    assert response.status_code == status, response.get_data(as_text=True)
    error = response.get_json()["error"]
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]


@pytest.mark.parametrize(("body", "status"), JSON_BODIES)
def test_malformed_json_bodies(app, chat, chat_id, body, status):
    before = _snapshot(app)
    response = chat.client.post(
        f"/api/chats/{chat_id}/loop",
        data=json.dumps(body),
        content_type="application/json",
        headers=chat.auth.headers(),
    )
    _assert_error_shape(response, status)
    assert _snapshot(app) == before


@pytest.mark.parametrize(
    ("data", "content_type", "status"),
    [
        ('{"message": "hi"', "application/json", 400),
        ("{message: 'hi'}", "application/json", 400),
        ("message=hi", "application/x-www-form-urlencoded", 415),
        ('{"message": "hi"}', "text/plain", 415),
        ("", "application/json", 400),
        (b"\xff\xfe\x00", "application/json", 400),
    ],
)
def test_unparseable_or_wrongly_typed_bodies(app, chat, chat_id, data, content_type, status):
    before = _snapshot(app)
    response = chat.client.post(
        f"/api/chats/{chat_id}/loop",
        data=data,
        content_type=content_type,
        headers=chat.auth.headers(),
    )
    _assert_error_shape(response, status)
    assert _snapshot(app) == before


def test_someone_elses_or_a_missing_chat_is_404(app, chat, auth):
    other_user = auth.create("eve@example.com")
    with app.extensions["database"].session() as session:
        other = Conversation(user_id=other_user, title="Eve's chat")
        session.add(other)
        session.commit()
        other_id = other.id
    before = _snapshot(app)
    for chat_id in (other_id, 999_999):
        response = chat.post(f"/api/chats/{chat_id}/loop", {"message": "hi"})
        _assert_error_shape(response, 404)
    assert _snapshot(app) == before


def test_loop_without_csrf_from_a_browser_session_is_400(app, chat, chat_id):
    before = _snapshot(app)
    response = chat.client.post(f"/api/chats/{chat_id}/loop", json={"message": "hi"})
    _assert_error_shape(response, 400)
    assert _snapshot(app) == before


def test_loop_without_login_is_401(app, chat_id, chat):
    anonymous = app.test_client()
    response = anonymous.post(f"/api/chats/{chat_id}/loop", json={"message": "hi"})
    _assert_error_shape(response, 401)


def test_runs_of_someone_else_are_404(app, chat, fake_model, auth):
    fake_model.script("hello")
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "hi")
    chat.wait(run_id)
    auth.create("eve@example.com")
    eve = app.test_client()
    from tests.factories import AuthActions

    AuthActions(app, eve).login("eve@example.com")
    assert eve.get(f"/api/runs/{run_id}").status_code == 404
    assert eve.get(f"/api/chats/{chat_id}/messages").status_code == 404
