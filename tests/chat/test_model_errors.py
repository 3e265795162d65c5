"""When the model server refuses a run's request, the person sees a short plain reason (an
`error` row), and the run log keeps the server's full reason for `flask chat-logs`.
Through the real SDK and the fake Messages API server."""

from __future__ import annotations

import json

from app.llm.errors import MAX_REASON_CHARS, NO_ROUTE_TEXT
from tests.factories import ChatDriver, run_log_entries
from tests.fake_model import api_error

API_KEY = "sk-ant-api03-deployment-key-0123456789abcdef"
OTHER_KEY = "sk-proj-SomeoneElsesKey0123456789"


def _fail_once(app, chat, fake_model, refusal) -> tuple[int, int, dict]:
    """A chat whose first message the server refuses: (chat id, run id, the error row)."""
    fake_model.script(refusal)
    chat_id = chat.new_chat("Refused")
    run_id = chat.send(chat_id, "Hello")
    assert chat.wait(run_id)["status"] == "error"
    run_log_entries(app, run_id)  # the log is written
    row = chat.rows(chat_id)[-1]
    assert row["kind"] == "error"
    return chat_id, run_id, row


def _chat_logs(app, chat_id) -> str:
    result = app.test_cli_runner().invoke(args=["chat-logs", str(chat_id)])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_model_the_server_does_not_know_is_named_as_the_reason(app, chat, fake_model):
    _, _, row = _fail_once(
        app, chat, fake_model, api_error(404, "not_found_error", "model: claude-x")
    )

    assert row["content"] == NO_ROUTE_TEXT
    assert "not_found_error" not in row["content"]


def test_a_long_refusal_is_shortened_for_the_person_and_kept_whole_in_the_log(
    app, chat, fake_model
):
    message = "messages.0.content.0.text: this field failed validation because\n\n   " + " ".join(
        f"reason-{n}" for n in range(80)
    )
    chat_id, run_id, row = _fail_once(
        app, chat, fake_model, api_error(400, "invalid_request_error", message)
    )

    prefix = "The model server refused the request: "
    assert row["content"].startswith(prefix + "messages.0.content.0.text: this field failed")
    assert row["content"].endswith("…")
    assert len(row["content"]) <= len(prefix) + MAX_REASON_CHARS
    assert "\n" not in row["content"]

    entries = run_log_entries(app, run_id)
    (call,) = [e.data for e in entries if e.kind == "model_call"]
    assert call["error"] == f"invalid_request_error: {message}"
    assert call["error_status"] == 400
    (full,) = [e.data for e in entries if e.kind == "model_error"]
    assert full == {"status": 400, "code": "invalid_request_error", "message": message}
    (told,) = [e.data for e in entries if e.kind == "error"]
    assert told == {"code": "invalid_request_error", "message": row["content"]}

    out = _chat_logs(app, chat_id)
    (line,) = [line for line in out.splitlines() if " model_error " in line]
    # One line, whitespace collapsed, nothing cut.
    assert line.endswith(f"HTTP 400 · invalid_request_error: {' '.join(message.split())}")
    assert "reason-79" in line
    assert "ERROR invalid_request_error: messages.0.content.0.text" in out
    assert "(HTTP 400)" in out


def test_the_404_reason_in_full_is_in_chat_logs(app, chat, fake_model):
    chat_id, _, _ = _fail_once(
        app, chat, fake_model, api_error(404, "not_found_error", "model: claude-x")
    )

    out = _chat_logs(app, chat_id)

    assert "HTTP 404 · not_found_error: model: claude-x" in out
    assert "error: not_found_error: The model server has no route for this model" in out


def test_an_api_key_in_a_server_message_reaches_neither_the_person_nor_the_log(
    make_app, fake_model, auth
):
    app = make_app(anthropic_base_url=fake_model.base_url, anthropic_api_key=API_KEY)
    auth.app, auth.client = app, app.test_client()
    auth.create()
    auth.login()
    chat = ChatDriver(app, auth.client, auth)
    message = (
        f"invalid x-api-key {API_KEY} for this model; also tried {OTHER_KEY} "
        "with Authorization: Bearer tok.en-123456789"
    )

    chat_id, run_id, row = _fail_once(
        app, chat, fake_model, api_error(400, "invalid_request_error", message)
    )

    assert row["content"].startswith("The model server refused the request: invalid x-api-key")
    stored = json.dumps([e.data for e in run_log_entries(app, run_id)])
    run = chat.wait(run_id)
    out = _chat_logs(app, chat_id)
    for where in (row["content"], stored, json.dumps(run), out):
        for secret in (API_KEY, OTHER_KEY, "tok.en-123456789"):
            assert secret not in where
    assert "[redacted]" in row["content"] and "[redacted]" in out
    # The key still travels where it belongs.
    assert fake_model.requests[0].headers.get("authorization") == f"Bearer {API_KEY}"


def test_a_crashed_backend_is_a_server_failure_not_a_code(app, chat, fake_model):
    # The SDK retries 5xx itself; every attempt fails here.
    fake_model.script(*[api_error(502, "api_error", "Bad Gateway", retry_after=0.01)] * 4)
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Hello")
    assert chat.wait(run_id)["status"] == "error"

    row = chat.rows(chat_id)[-1]
    assert row["kind"] == "error"
    assert row["content"].startswith("The model server failed")
    assert "api_error" not in row["content"]
