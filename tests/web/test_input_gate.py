"""The input gate (app/web/input_gate.py): ids out of range answer 404; NUL bytes, lone
surrogates and JSON nested too deep answer 400 on every route, on SQLite and PostgreSQL,
and nothing is written."""

from __future__ import annotations

import pytest

from app.chat.models import Message
from tests.factories import add_conversation
from tests.web.helpers import count, json_error, snapshot

HUGE_IDS = [str(2**63), str(2**63 + 1), str(10**30), "-1", "-9223372036854775809"]


@pytest.mark.parametrize("raw_id", HUGE_IDS)
@pytest.mark.parametrize(
    "method, path",
    [
        ("get", "/chats/{id}"),
        ("post", "/chats/{id}/messages"),
        ("post", "/chats/{id}/attachments"),
        ("get", "/api/chats/{id}/messages"),
        ("post", "/api/chats/{id}/loop"),
        ("get", "/api/runs/{id}"),
        ("post", "/settings/tokens/{id}/revoke"),
    ],
)
def test_ids_out_of_range_answer_404(client, auth, user, method, path, raw_id):
    response = getattr(client, method)(
        path.format(id=raw_id), json={"message": "hi"}, headers=auth.headers()
    )
    assert response.status_code == 404


@pytest.mark.parametrize("raw_id", [2**31 - 1, 2**31, 2**63 - 1])
def test_ids_near_what_a_column_holds_answer_404_not_500(client, auth, user, raw_id):
    response = client.get(f"/api/chats/{raw_id}/messages")
    assert json_error(response, 404) == "NOT_FOUND"


@pytest.mark.parametrize(
    "body",
    [
        '{"message": "a\\u0000b"}',
        '{"message": "lone \\ud800 surrogate"}',
        '{"message\\u0000": "key with a NUL"}',
        '{"message": "hi", "x": ["\\udfff"]}',
    ],
)
def test_json_with_nul_or_lone_surrogates_answers_400(app, client, auth, user, body):
    chat = add_conversation(app, user)
    before = snapshot(app)
    response = client.post(
        f"/api/chats/{chat}/loop",
        data=body,
        headers={**auth.headers(), "Content-Type": "application/json"},
    )
    assert json_error(response, 400) == "INVALID_JSON"
    assert "NUL byte or invalid Unicode" in response.get_json()["error"]["message"]
    assert snapshot(app) == before


@pytest.mark.parametrize("depth", [33, 5_000, 200_000])
def test_json_nested_deeper_than_the_setting_answers_400(app, client, auth, user, depth):
    body = '{"text": ' + "[" * depth + "]" * depth + "}"
    response = client.post(
        "/api/memory/instruct",
        data=body,
        headers={**auth.headers(), "Content-Type": "application/json"},
    )
    assert json_error(response, 400) == "INVALID_JSON"
    assert "nested deeper than 32 levels" in response.get_json()["error"]["message"]


def test_json_as_deep_as_the_setting_allows_reaches_the_route(client, auth, user):
    body = '{"text": ' + "[" * 31 + "]" * 31 + "}"
    response = client.post(
        "/api/memory/instruct",
        data=body,
        headers={**auth.headers(), "Content-Type": "application/json"},
    )
    # The route itself refuses it: 'text' must be a string.
    assert json_error(response, 400) == "INVALID_FIELD"


@pytest.mark.parametrize("message", ["with a \x00 NUL", "\x00"])
def test_form_fields_with_nul_answer_400_and_write_nothing(app, client, auth, user, message):
    chat = add_conversation(app, user)
    response = client.post(
        f"/chats/{chat}/messages",
        data={"message": message, "csrf_token": auth.csrf},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 400
    assert "NUL byte" in response.get_data(as_text=True)
    assert count(app, Message, Message.conversation_id == chat) == 0


def test_form_fields_with_raw_surrogate_bytes_are_never_stored_broken(app, client, auth, user):
    """UTF-8 bytes of a surrogate (ED A0 80) are not UTF-8: werkzeug reads them as U+FFFD,
    so the message is stored readable (never a 500 on either database)."""
    chat = add_conversation(app, user)
    body = b"message=a%ED%A0%80b&csrf_token=" + auth.csrf.encode()
    response = client.post(
        f"/chats/{chat}/messages",
        data=body,
        headers={"HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 200, response.get_data(as_text=True)
    assert count(app, Message, Message.conversation_id == chat) == 1


def test_query_strings_with_nul_answer_400(app, client, user):
    chat = add_conversation(app, user)
    response = client.get(f"/api/chats/{chat}/messages?after=%00")
    assert json_error(response, 400) == "INVALID_INPUT"


def test_a_file_name_with_nul_answers_400(app, client, auth, user):
    import io

    chat = add_conversation(app, user)
    response = client.post(
        f"/api/chats/{chat}/attachments",
        data={"file": (io.BytesIO(b"hello"), "notes\x00.txt", "text/plain")},
        headers=auth.headers(),
    )
    assert json_error(response, 400) == "INVALID_INPUT"


@pytest.mark.parametrize(
    "path, status",
    [
        ("/api/chats/{chat}/messages?after=9223372036854775808", 400),
        ("/api/chats/{chat}/messages?after=99999999999999999999", 400),
        ("/welcome/starters?conversation=100000000000000000000", 404),
        ("/welcome/starters?conversation=4294967296", 404),
        ("/workspace/outputs?offer=4294967296", 200),  # an unknown filter shows all
    ],
)
def test_ids_in_query_strings_beyond_the_database_answer_4xx(app, client, user, path, status):
    chat = add_conversation(app, user)
    response = client.get(path.format(chat=chat))
    assert response.status_code == status, response.get_data(as_text=True)[:300]


@pytest.mark.parametrize("query", ["user=100000000000000000000", "conversation=4294967296"])
def test_admin_run_logs_with_ids_beyond_the_database_answer_4xx(app, client, auth, query):
    auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    response = client.get(f"/admin/runs?{query}")
    assert response.status_code in (400, 404)
