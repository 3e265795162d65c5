"""The run's tool calls on their own (app/chat/tool_calls.py): built with a run's state,
frames and guard, with no loop and no model. What they answer, what they hold while the
conversation is tainted, and what the run's state counts of them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from app.chat.models import Conversation
from app.chat.rows import insert_message
from app.chat.run_log import RunLog
from app.chat.run_state import RunCancelled, RunFrames, RunGuard, RunIds, RunState
from app.chat.runs import claim_run, finish_run, start_run
from app.chat.steps import RunSteps
from app.chat.tool_calls import ToolCalls
from app.kinds import RowKind
from app.llm.client import AssistantTurn
from app.tools.registry import ACTION, OUTSIDE, READ, UI, Preset, ToolInput, tool
from app.tools.results import Pause, ToolResult


@dataclass
class Calls:
    tools: ToolCalls
    state: RunState
    published: list

    def turn(self, *uses: tuple[str, dict]) -> AssistantTurn:
        content = [
            {"type": "tool_use", "id": f"call_{i}", "name": name, "input": args}
            for i, (name, args) in enumerate(uses)
        ]
        return AssistantTurn(content=content, stop_reason="tool_use", usage={})


@pytest.fixture
def calls(app, chat, monkeypatch) -> Calls:
    """A run of a new chat, claimed (running), with its tool calls; the frames they send
    are kept in `published` besides going to the hub."""
    services = app.extensions["services"]
    chat_id = chat.new_chat()
    with services.database.session() as session:
        run = start_run(session, session.get(Conversation, chat_id), "message")
        claimed = claim_run(session, run.id)
        session.commit()
    ids = RunIds(run.id, chat_id, claimed.user_id, claimed.turn_index)
    state = RunState(
        ids,
        RunLog(services.database, services.settings, ids.run_id, chat_id),
        RunSteps(ids.run_id, services.tools),
    )
    frames = RunFrames(services.hub, state)
    published: list = []
    monkeypatch.setattr(frames, "publish", published.append)
    real_emit = frames.emit
    monkeypatch.setattr(frames, "emit", lambda event: (published.append(event), real_emit(event)))
    tools = ToolCalls(services, state, frames, RunGuard(ids.run_id, services.cancellations))
    return Calls(tools, state, published)


class UrlInput(ToolInput):
    url: str | None = None


class RequiredUrlInput(ToolInput):
    url: str


def _add(
    app, name: str, category: Preset = READ, input: type[ToolInput] = UrlInput, **options
) -> None:
    handler = options.pop("handler", lambda ctx, args: ToolResult({"ok": name}))
    app.extensions["services"].tools.add(
        tool(
            name=name,
            description=name,
            category=category,
            input=input,
            handler=handler,
            **options,
        )
    )


def _assistant_row(app, calls: Calls):
    with app.extensions["database"].session() as session:
        row = insert_message(
            session,
            calls.state.ids.conversation_id,
            role="assistant",
            kind=RowKind.HOST,
            content="Let me look.",
            meta={},
        )
        session.commit()
        return row


def test_an_unknown_tool_and_a_bad_input_are_answered_with_errors_and_the_run_goes_on(app, calls):
    _add(app, "strict_tool", input=RequiredUrlInput)
    turn = calls.turn(("no_such_tool", {}), ("strict_tool", {}))

    assert calls.tools.run_tools(turn, _assistant_row(app, calls)) is False

    assert [(s["tool"], s["ok"]) for s in calls.state.steps.items] == [
        ("no_such_tool", False),
        ("strict_tool", False),
    ]
    assert calls.state.billable_calls == 0


def test_a_billable_call_is_counted_once_it_ran_without_error(app, calls):
    _add(app, "paid_tool", billable=True)
    _add(app, "paid_failing", billable=True, handler=lambda ctx, a: ToolResult("no", True))
    turn = calls.turn(("paid_tool", {}), ("paid_failing", {}), ("paid_tool", {}))

    assert calls.tools.run_tools(turn, _assistant_row(app, calls)) is False

    assert calls.state.billable_calls == 2


def test_an_untrusted_result_taints_the_run_and_a_later_write_is_held_on_a_card(app, chat, calls):
    _add(app, "read_page", category=OUTSIDE)
    _add(app, "save_thing", category=ACTION)
    row = _assistant_row(app, calls)

    paused = calls.tools.run_tools(calls.turn(("read_page", {}), ("save_thing", {})), row)

    assert paused is True
    assert calls.state.sources == [{"tool": "read_page"}]
    card = chat.rows(calls.state.ids.conversation_id)[-1]["card"]
    assert (card["kind"], card["tool"], card["status"]) == (
        "confirmation",
        "save_thing",
        "awaiting",
    )
    assert [e.kind for e in calls.published if e.kind == "toolCall"] == ["toolCall"]


def test_only_one_question_is_asked_per_turn(app, chat, calls):
    ask = {"category": UI, "handler": lambda ctx, args: Pause({"kind": "choice"})}
    _add(app, "ask_one", **ask)
    _add(app, "ask_two", **ask)

    paused = calls.tools.run_tools(
        calls.turn(("ask_one", {}), ("ask_two", {})), _assistant_row(app, calls)
    )

    assert paused is True
    rows = chat.rows(calls.state.ids.conversation_id)
    assert rows[-1]["card"]["tool"] == "ask_one"
    # The second was answered at once (the model reads why), the first asked last.
    assert [(s["tool"], s["ok"]) for s in calls.state.steps.items] == [
        ("ask_two", False),
        ("ask_one", True),
    ]
    assert [e.card["tool"] for e in calls.published if e.kind == "toolCall"] == ["ask_one"]


def test_a_run_ended_elsewhere_writes_no_result(app, calls):
    _add(app, "harmless")
    with app.extensions["database"].session() as session:
        assert finish_run(session, calls.state.ids.run_id, "cancelled")
        session.commit()

    with pytest.raises(RunCancelled):
        calls.tools.run_tools(calls.turn(("harmless", {})), _assistant_row(app, calls))
    assert calls.state.steps.items == []
