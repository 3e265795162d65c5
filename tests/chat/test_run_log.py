"""Run logs: a real run through the loop and the fake model leaves a structured record of
its model calls, tool calls, frames and errors, with secrets redacted."""

from __future__ import annotations

import json

from sqlalchemy import select

from app.accounts.models import User
from app.chat.models import RunLogEntry
from app.chat.run_log import MAX_FIELD_CHARS, REDACTED, Redactor, RunLog, load_reports
from app.workspace.models import Offer
from tests.factories import ChatDriver, run_log_entries
from tests.fake_model import Turn, api_error, text, tool_use


def _offer(app, name="Calm Mornings"):
    with app.extensions["database"].session() as session:
        user_id = session.scalar(select(User.id).where(User.email == "ada@example.com"))
        offer = Offer(user_id=user_id, name=name, description="Coaching", price="$490")
        session.add(offer)
        session.commit()
        return offer.id


def _frame_totals(entries) -> dict[str, int]:
    totals: dict[str, int] = {}
    for entry in entries:
        if entry.kind == "frames":
            for kind, n in entry.data["counts"].items():
                totals[kind] = totals.get(kind, 0) + n
    return totals


def test_a_run_logs_its_model_calls_tool_calls_and_frames(app, chat, fake_model):
    chat_id = chat.new_chat()
    fake_model.script("Hello.")
    chat.wait(chat.send(chat_id, "Hi"))
    _offer(app, "Calm Mornings")
    fake_model.script(
        Turn(text("Let me look."), tool_use("list_offers", {})),
        Turn(text("You sell Calm Mornings, a coaching offer.")),
    )

    run_id = chat.send(chat_id, "What do I sell?")
    assert chat.wait(run_id)["status"] == "completed"

    entries = run_log_entries(app, run_id)
    kinds = [e.kind for e in entries if e.kind != "frames"]
    assert kinds == ["model_call", "tool_call", "model_call"]
    first, tool, second = (e.data for e in entries if e.kind != "frames")

    requests = fake_model.requests[-2:]
    assert first["model"] == requests[0]["model"]
    assert first["messages"] == len(requests[0]["messages"])
    assert first["tools"] == len(requests[0]["tools"]) > 10
    assert first["tool_choice"] == "auto"
    assert first["estimated_input_tokens"] > 0
    assert first["stop_reason"] == "tool_use"
    assert first["usage"]["input_tokens"] > 0 and first["usage"]["output_tokens"] > 0
    assert first["duration_ms"] >= 0
    assert second["stop_reason"] == "end_turn"
    assert second["messages"] == len(requests[1]["messages"]) > first["messages"]

    assert tool["name"] == "list_offers"
    assert tool["tool_use_id"].startswith("toolu_")
    assert tool["input"] == "{}"
    assert "Calm Mornings" in tool["output"]
    assert tool["is_error"] is False

    frames = _frame_totals(entries)
    assert frames["textDelta"] >= 2
    assert frames["message"] >= 1  # the answer row
    assert frames["done"] == 1
    assert frames["hostTurn"] == 1  # "Let me look." before the tool call

    # Runs are logged separately: the first run has its own single model call.
    with app.extensions["database"].session() as session:
        reports = load_reports(session, chat_id)
    assert [r.run.id for r in reports][-1] == run_id
    assert [r.model_calls() for r in reports] == [1, 2]


def test_a_model_error_is_logged_with_the_failed_call(app, chat, fake_model):
    fake_model.script(*[api_error(529, "overloaded_error", "Overloaded")] * 4)
    chat_id = chat.new_chat()

    run_id = chat.send(chat_id, "Hello")
    assert chat.wait(run_id)["status"] == "error"

    entries = run_log_entries(app, run_id)
    calls = [e.data for e in entries if e.kind == "model_call"]
    assert len(calls) == 1
    assert calls[0]["error"].startswith("overloaded_error")
    assert calls[0]["stop_reason"] is None
    errors = [e.data for e in entries if e.kind == "error"]
    assert [e["code"] for e in errors] == ["overloaded_error"]
    assert "busy" in errors[0]["message"]  # what the person was told
    assert _frame_totals(entries)["error"] == 1


def test_tool_errors_are_flagged(app, chat, fake_model):
    fake_model.script(
        Turn(tool_use("get_offer", {"offer_id": 999999})),
        Turn(text("That offer does not exist.")),
    )
    chat_id = chat.new_chat()

    run_id = chat.send(chat_id, "Show offer 999999")
    chat.wait(run_id)

    (tool,) = [e.data for e in run_log_entries(app, run_id) if e.kind == "tool_call"]
    assert tool["name"] == "get_offer"
    assert json.loads(tool["input"]) == {"offer_id": 999999}
    assert tool["is_error"] is True
    assert tool["output"]


def test_a_quoted_number_is_taken_as_a_number_and_the_log_says_so(app, chat, fake_model):
    chat_id = chat.new_chat()
    offer_id = _offer(app, "Calm Mornings")
    fake_model.script(
        Turn(tool_use("get_offer", {"offer_id": f"{offer_id}"})),
        Turn(text("Calm Mornings costs $490.")),
    )

    run_id = chat.send(chat_id, "What does my offer cost?")
    assert chat.wait(run_id)["status"] == "completed"

    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert "is_error" not in result and "Calm Mornings" in result["content"]
    assert len(fake_model.requests) == 2, "no iteration spent on a refused call"
    (tool,) = [e.data for e in run_log_entries(app, run_id) if e.kind == "tool_call"]
    assert tool["is_error"] is False and tool["coerced"] == ["offer_id"]
    assert json.loads(tool["input"]) == {"offer_id": offer_id}


def test_a_crashing_tool_answers_with_a_reference_that_is_in_the_server_log(
    app, chat, fake_model, caplog
):
    from app.tools.registry import READ, NoInput, tool

    def crash(ctx, args):
        raise RuntimeError("disk on fire")

    app.extensions["services"].tools.add(
        tool(name="crash", description="Crashes.", category=READ, input=NoInput, handler=crash)
    )
    fake_model.script(Turn(tool_use("crash", {})), Turn(text("Something broke.")))
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Crash"))["status"] == "completed"

    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "disk on fire" not in result["content"]
    reference = result["content"].rsplit("reference ", 1)[1].rstrip(").")
    assert any(reference in record.getMessage() for record in caplog.records)


def test_secrets_in_tool_input_and_output_never_reach_the_log(make_app, fake_model, auth):
    api_key = "sk-ant-api03-very-secret-key-0123456789"
    app = make_app(anthropic_base_url=fake_model.base_url, anthropic_api_key=api_key)
    auth.app, auth.client = app, app.test_client()
    auth.create()
    auth.login()
    chat = ChatDriver(app, auth.client, auth)
    leaked_token = "ld_" + "x" * 40
    fake_model.script(
        # A bad input: the key is in the input (the error says what is wrong, not what came).
        Turn(tool_use("get_offer", {"offer_id": api_key})),
        Turn(
            tool_use(
                "save_character",
                {
                    "name": f"Agent {leaked_token}",
                    "description": "Lives at https://admin:hunter2-pass@example.com/home",
                },
            )
        ),
        Turn(text("Done.")),
    )
    chat_id = chat.new_chat()

    run_id = chat.send(chat_id, "Look this up")
    assert chat.wait(run_id)["status"] == "completed"

    entries = run_log_entries(app, run_id)
    stored = json.dumps([e.data for e in entries])
    for secret in (api_key, "hunter2-pass", leaked_token):
        assert secret not in stored
    tools = [e.data for e in entries if e.kind == "tool_call"]
    assert [t["name"] for t in tools] == ["get_offer", "save_character"]
    assert REDACTED in tools[0]["input"] and tools[0]["is_error"] is True
    assert tools[1]["is_error"] is False
    assert f"Agent {REDACTED}" in tools[1]["output"]
    assert f"https://{REDACTED}@example.com/home" in tools[1]["input"]  # only the secret goes
    # The key still travels where it belongs.
    assert fake_model.requests[0].headers.get("authorization") == f"Bearer {api_key}"


def test_the_redactor_covers_secret_keys_tokens_and_url_credentials(app):
    redactor = Redactor(app.config["LOOPDESK"])
    cleaned = redactor.data(
        {
            "password": "swordfish",
            "api_key": "anything",
            "headers": {"Authorization": "Bearer abc.def.ghi"},
            "note": "use Bearer abcdefghijkl and sk-proj-ABCDEFGHIJKLMNOPQRSTUV",
            "url": "postgresql://loopdesk:pg-pass@db:5432/app",
            "max_tokens": 1024,
            "name": "Calm Mornings",
        }
    )
    assert cleaned == {
        "password": REDACTED,
        "api_key": REDACTED,
        "headers": {"Authorization": REDACTED},
        "note": f"use Bearer {REDACTED} and {REDACTED}",
        "url": f"postgresql://{REDACTED}@db:5432/app",
        "max_tokens": 1024,
        "name": "Calm Mornings",
    }
    assert redactor.text("signed with test-secret") == f"signed with {REDACTED}"


def test_large_tool_output_is_capped_and_marked(app):
    services = app.extensions["services"]
    run_log = RunLog(services.database, services.settings, 1, 1)
    run_log.tool_call("get_output", "toolu_1", {"output_id": 1}, "y" * 10_000, False, 3)
    (entry,) = run_log._pending
    assert entry["data"]["output"].startswith("y" * MAX_FIELD_CHARS)
    assert entry["data"]["output"].endswith("[truncated: 10,000 characters in all]")
    assert entry["data"]["input"] == '{"output_id": 1}'


def test_steps_are_written_before_the_next_model_call_ends(app, chat, fake_model):
    """A run killed mid-way keeps its log up to its last step."""
    fake_model.script(
        Turn(tool_use("list_offers", {})),
        Turn(text("Still thinking about it."), delay_first=1.0),
    )
    chat_id = chat.new_chat()

    run_id = chat.send(chat_id, "What do I sell?")
    fake_model.wait_for_requests(2)

    kinds = [e.kind for e in run_log_entries(app, run_id, settle=False)]
    assert kinds[:2] == ["model_call", "tool_call"]
    assert "frames" in kinds
    chat.wait(run_id)


def test_run_logs_off_records_nothing(make_app, fake_model, auth):
    app = make_app(anthropic_base_url=fake_model.base_url, run_logs=False)
    auth.app, auth.client = app, app.test_client()
    auth.create()
    auth.login()
    chat = ChatDriver(app, auth.client, auth)
    fake_model.script(Turn(tool_use("list_offers", {})), Turn(text("None yet.")))
    chat_id = chat.new_chat()

    # chat.wait awaits the run's future: its end-of-run flush, had there been one, is done.
    assert chat.wait(chat.send(chat_id, "Hi"))["status"] == "completed"

    with app.extensions["database"].session() as session:
        assert session.scalars(select(RunLogEntry)).all() == []
