"""One turn whose own tool results outgrow the window: the request drops the turn's oldest
tool steps, then shortens the largest results with a note the model reads, and the run
ends with an answer; a step that cannot fit even so ends the run with a clear error. The
fake model rejects any request over its window (ceil(chars / 4)) and any unpaired
tool_use."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from app.chat.fitting import TurnTooLarge, fit_messages
from app.chat.models import Message
from app.kinds import RowKind
from app.llm.budget import estimate_messages
from app.tools.registry import READ, Integer, Tool, ToolInput, tool
from tests.factories import AuthActions, ChatDriver
from tests.fake_model import Turn, count_request_tokens, text, tool_use, validate_request

WINDOW = 50_000
PAGE_CHARS = 30_000
PAGES_PER_STEP = 4
READING_STEPS = 6  # 6 x 4 x 30,000 characters: 180,000 tokens, 3.6 windows
ASK = "Read these pages and summarize them"
ANSWER = "Here is the summary of every page."
# How long a test waits for an event the run is expected to reach; never a timing goal.
EVENT_WAIT = 120


def _page(number: int) -> str:
    line = f"Page {number} describes the spring offer, its personas and the launch plan. "
    return (line * (PAGE_CHARS // len(line) + 1))[:PAGE_CHARS]


class PageInput(ToolInput):
    page: Integer


def _read_page_tool() -> Tool:
    return tool(
        name="read_page",
        description="Read one page of the person's documents.",
        category=READ,
        input=PageInput,
        handler=lambda ctx, args: _page(args.page),
    )


def _reading_app(make_app, fake_model, auth):
    app = make_app(
        anthropic_base_url=fake_model.base_url,
        context_window_tokens=WINDOW,
        max_message_chars=1_000_000,
    )
    fake_model.context_window = WINDOW
    app.extensions["services"].tools.add(_read_page_tool())
    auth.app, auth.client = app, app.test_client()
    auth.create()
    auth.login()
    return app, ChatDriver(app, auth.client, auth)


def _reader(before_answer=None):
    """The model: READING_STEPS steps of four pages each, then the answer (`before_answer`
    runs first, in the fake's request thread)."""
    steps = iter(range(READING_STEPS))

    def respond(body):
        step = next(steps, None)
        if step is None:
            if before_answer is not None:
                before_answer()
            return Turn(text(ANSWER))
        first = step * PAGES_PER_STEP
        calls = [tool_use("read_page", {"page": first + n}) for n in range(PAGES_PER_STEP)]
        return Turn(text(f"Reading pages {first} to {first + PAGES_PER_STEP - 1}."), *calls)

    return respond


def _assert_every_request_fit(fake_model):
    assert fake_model.rejections == [], fake_model.rejections
    for body in fake_model.requests:
        assert count_request_tokens(body) + body["max_tokens"] <= WINDOW


def test_a_turn_whose_tool_results_outgrow_the_window_ends_with_an_answer(
    make_app, fake_model, auth
):
    app, chat = _reading_app(make_app, fake_model, auth)
    fake_model.responder = _reader()
    chat_id = chat.new_chat()

    run = chat.wait(chat.send(chat_id, ASK), timeout=120)

    assert run["status"] == "completed", run
    assert chat.rows(chat_id)[-1]["content"] == ANSWER
    _assert_every_request_fit(fake_model)
    assert len(fake_model.requests) == READING_STEPS + 1
    last = fake_model.requests[-1]["messages"]
    # The turn's own message and its latest step are there; the oldest steps are not.
    assert last[0] == {"role": "user", "content": [{"type": "text", "text": ASK}]}
    sent = str(last)
    assert "Page 23 describes" in sent and "Page 0 describes" not in sent
    assert "earlier tool calls of this turn were left out to fit" in sent
    assert "[result shortened from 30,000 to " in sent
    # The rows keep every result whole.
    with app.extensions["database"].session() as session:
        kept = session.scalars(
            select(Message).where(
                Message.conversation_id == chat_id, Message.kind == RowKind.TOOL_RESULT
            )
        ).all()
    assert len(kept) == READING_STEPS * PAGES_PER_STEP
    assert all(len(row.meta["blocks"][0]["content"]) == PAGE_CHARS for row in kept)


def test_another_person_is_answered_while_a_run_fits_its_large_turn(make_app, fake_model, auth):
    app, chat = _reading_app(make_app, fake_model, auth)
    arrived, release = threading.Event(), threading.Event()

    def hold_the_answer():
        # The large step's request reached the model: the run is working on it.
        arrived.set()
        release.wait(EVENT_WAIT)

    fake_model.responder = _reader(before_answer=hold_the_answer)
    grace = AuthActions(app, app.test_client())
    grace.create(email="grace@example.com")
    grace.login(email="grace@example.com")
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, ASK)
    try:
        assert arrived.wait(EVENT_WAIT), "the run never sent its large step"
        assert chat.client.get(f"/api/runs/{run_id}").get_json()["status"] == "running"
        page = grace.client.get("/settings")
        assert page.status_code == 200 and "grace@example.com" in page.get_data(as_text=True)
        assert grace.client.get("/api/chats").status_code == 200
    finally:
        release.set()

    assert chat.wait(run_id, timeout=120)["status"] == "completed"
    assert chat.rows(chat_id)[-1]["content"] == ANSWER
    _assert_every_request_fit(fake_model)


def test_a_step_that_cannot_fit_even_shortened_ends_with_a_clear_error(make_app, fake_model, auth):
    app, chat = _reading_app(make_app, fake_model, auth)
    # One call whose own input is larger than the window: nothing of it can be shortened.
    fake_model.script(Turn(tool_use("read_page", {"page": 1, "why": "x" * (WINDOW * 4)})))
    chat_id = chat.new_chat()

    run = chat.wait(chat.send(chat_id, ASK), timeout=120)

    assert run["status"] == "error", run
    last = chat.rows(chat_id)[-1]
    assert last["kind"] == "error"
    assert "too large for the model's context" in last["content"]
    assert run["error"].startswith("turn_too_large:")
    assert len(fake_model.requests) == 1, "the step that cannot fit is never sent"
    with app.extensions["database"].session() as session:
        errors = session.scalar(
            select(func.count())
            .select_from(Message)
            .where(Message.conversation_id == chat_id, Message.kind == RowKind.ERROR)
        )
    assert errors == 1


# -- fitting one request (app/chat/fitting.py) ------------------------------------------


def _thinking(n: int) -> dict:
    return {"type": "thinking", "thinking": f"Plan {n}. " * 1_000, "signature": f"sig{n}"}


def _step(n: int, *result_chars: int) -> list[dict]:
    """Step n: the assistant's thinking and calls, then their results."""
    ids = [f"toolu_{n}_{k}" for k in range(len(result_chars))]
    calls = [{"type": "tool_use", "id": i, "name": "read_page", "input": {"page": n}} for i in ids]
    results = [
        {"type": "tool_result", "tool_use_id": i, "content": _page(n)[:chars]}
        for i, chars in zip(ids, result_chars, strict=True)
    ]
    return [
        {"role": "assistant", "content": [_thinking(n), *calls]},
        {"role": "user", "content": results},
    ]


def _valid(messages: list[dict]) -> str | None:
    body = {
        "model": "m",
        "max_tokens": 2_048,
        "thinking": {"type": "enabled", "budget_tokens": 1_024},
        "messages": messages,
    }
    return validate_request(body, issued_signatures={f"sig{n}" for n in range(4)})


def test_a_turn_keeps_its_message_and_latest_step_and_shortens_the_largest_results():
    ask = {"role": "user", "content": [{"type": "text", "text": ASK + " " + "x" * 6_000}]}
    messages = [ask, *_step(1, 20_000, 20_000), *_step(2, 20_000), *_step(3, 15_000, 15_000, 300)]
    budget = 6_000

    fitted = fit_messages(messages, budget, keep_thinking=True)

    assert estimate_messages(fitted) <= budget
    assert _valid(fitted) is None, _valid(fitted)
    assert fitted[0] == ask and fitted[1] == messages[-2], "the message and latest step stay"
    assert len(fitted) == 3
    results = fitted[2]["content"]
    assert [b.get("tool_use_id") for b in results[:3]] == ["toolu_3_0", "toolu_3_1", "toolu_3_2"]
    shortened = [b["content"] for b in results[:2]]
    kept = len(shortened[0].split("\n\n[result shortened")[0])
    for content in shortened:
        assert content.endswith(f"[result shortened from 15,000 to {kept:,} characters to fit]")
    assert results[2] == messages[-1]["content"][2], "the small result is left whole"
    assert results[3]["text"].startswith("[The results of 3 earlier tool calls of this turn")


def test_a_step_larger_than_the_budget_even_shortened_is_refused():
    messages = [{"role": "user", "content": [{"type": "text", "text": ASK}]}, *_step(1, 90_000)]
    messages[1]["content"][1]["input"] = {"page": 1, "why": "x" * 60_000}

    with pytest.raises(TurnTooLarge) as refused:
        fit_messages(messages, 6_000, keep_thinking=True)

    assert refused.value.code == "turn_too_large"
