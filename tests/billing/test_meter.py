"""Metering: one usage event per run, keyed `{conversation_id}:chat:{turn_index}`, worth
the host model's weight plus the billable tool calls that ran; written twice, counted once."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
import sqlalchemy
from sqlalchemy import select

from app.billing.meter import record_run_usage
from app.billing.quota import credits_used, month_of
from app.chat.conversations import create_conversation
from app.chat.models import Run
from app.chat.runs import start_run
from app.config import DEFAULT_HOST_MODEL
from app.llm.demo import agent_output
from app.tools.registry import ACTION, ToolInput, tool
from app.tools.results import ToolResult, confirmation
from app.workspace.models import Offer
from tests.billing import metered, usage_events
from tests.fake_model import Turn, api_error, text, tool_use
from tests.waiting import scaled

HOST_WEIGHT = 3


@pytest.fixture
def app(make_app, fake_model):
    """The host model costs 3 credits a run here, so weight and tool calls are told apart."""
    return make_app(
        anthropic_base_url=fake_model.base_url,
        host_model=DEFAULT_HOST_MODEL,
        model_credit_weights={DEFAULT_HOST_MODEL: HOST_WEIGHT},
    )


def _settings(app):
    return app.extensions["services"].settings


def _queued_run(app, user_id) -> tuple[int, int]:
    """A conversation with one run that no executor picks up: metered only by the test."""
    with app.extensions["database"].session() as session:
        conversation = create_conversation(session, user_id)
        run = start_run(session, conversation, "message")
        session.commit()
        return conversation.id, run.id


def _meter(database, settings, run_id, billable_tool_calls) -> bool:
    """Meter the run in a transaction of its own, as a finished run does."""
    with database.session() as session:
        written = record_run_usage(session, settings, session.get(Run, run_id), billable_tool_calls)
        session.commit()
        return written


def _wait_done(subscription, timeout=5.0):
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        event = subscription.get(timeout=0.1)
        if event is not None and event.kind == "done":
            return event
    raise TimeoutError("no done event")


def _used(app, user_id) -> int:
    with app.extensions["database"].session() as session:
        return credits_used(session, user_id, month_of())


def test_the_same_usage_event_written_twice_counts_once(app, chat):
    conversation_id, run_id = _queued_run(app, chat.user_id)
    database = app.extensions["database"]

    assert _meter(database, _settings(app), run_id, 2) is True
    # A redelivered job, or a retry after a crash, meters the same run again (with a
    # different count): nothing changes.
    assert _meter(database, _settings(app), run_id, 7) is False
    assert _meter(database, _settings(app), run_id, 2) is False

    [event] = usage_events(app)
    assert event.idempotency_key == f"{conversation_id}:chat:0"
    assert (event.credits, event.billable_tool_calls) == (HOST_WEIGHT + 2, 2)
    assert _used(app, chat.user_id) == HOST_WEIGHT + 2


def test_writers_racing_on_one_key_write_one_event(app, chat):
    _, run_id = _queued_run(app, chat.user_id)
    database = app.extensions["database"]
    barrier = threading.Barrier(4)
    results = []

    def meter():
        barrier.wait()
        results.append(_meter(database, _settings(app), run_id, 1))

    threads = [threading.Thread(target=meter) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == [False, False, False, True]
    assert len(usage_events(app)) == 1
    assert _used(app, chat.user_id) == HOST_WEIGHT + 1


def test_each_turn_of_a_conversation_is_its_own_event(app, chat, fake_model):
    chat_id = chat.new_chat()
    for n in range(3):
        fake_model.script(f"Answer {n}.")
        assert chat.wait(chat.send(chat_id, f"Question {n}"))["status"] == "completed"

    with app.extensions["database"].session() as session:
        turns = session.scalars(
            select(Run.turn_index).where(Run.conversation_id == chat_id).order_by(Run.id)
        ).all()
    assert turns == [0, 1, 2]
    events = metered(app, chat.user_id, 3)
    assert [e.idempotency_key for e in events] == [f"{chat_id}:chat:{n}" for n in range(3)]
    assert {e.month for e in events} == {month_of()}
    assert _used(app, chat.user_id) == 3 * HOST_WEIGHT


def test_a_run_costs_the_model_weight_plus_its_billable_tool_calls(app, chat, fake_model):
    """list_offers is a read tool (free); quiz is an agent (billable)."""
    with app.extensions["database"].session() as session:
        offer = Offer(user_id=chat.user_id, name="Calm Mornings", description="Coaching")
        session.add(offer)
        session.commit()
        offer_id = offer.id
    quiz = agent_output("quiz", {"name": "Calm Mornings", "description": "Coaching"})
    fake_model.script(
        Turn(
            text("Let me look at your offers and write the quiz."),
            tool_use("list_offers", {}),
            tool_use("quiz", {"instructions": "A short quiz", "offer_id": offer_id}),
        ),
        Turn(text(json.dumps(quiz))),  # the quiz agent's answer
        Turn(text("Your quiz is ready.")),
    )
    chat_id = chat.new_chat()

    run = chat.wait(chat.send(chat_id, "Write a quiz for Calm Mornings"))

    assert run["status"] == "completed"
    assert any(r["kind"] == "agent_output" for r in chat.rows(chat_id))
    [event] = metered(app, chat.user_id, 1)
    assert (event.run_id, event.conversation_id) == (run["id"], chat_id)
    assert event.model == _settings(app).host_model
    assert event.billable_tool_calls == 1
    assert event.credits == HOST_WEIGHT + 1
    assert event.idempotency_key == f"{chat_id}:chat:0"


def test_a_billable_tool_that_fails_is_not_billed(app, chat, fake_model):
    fake_model.script(
        Turn(tool_use("ad_copy", {"instructions": "Ads"})),
        Turn(text('{"title": "Ads", "variants": "not a list"}')),
        Turn(text("still not json")),
        Turn(text("The ad copy writer failed; shall I try again?")),
    )
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Ads please"))["status"] == "completed"

    [event] = metered(app, chat.user_id, 1)
    assert (event.billable_tool_calls, event.credits) == (0, HOST_WEIGHT)


class HeroInput(ToolInput):
    name: str


def _approved_saves(ctx, args):
    return ToolResult({"saved": args["name"]})


def test_an_approved_billable_call_is_billed_in_the_run_that_carries_it_out(app, chat, fake_model):
    app.extensions["services"].tools.add(
        tool(
            name="render_hero",
            description="Render a hero portrait (asks first).",
            category=ACTION,
            input=HeroInput,
            phase="discovery",
            billable=True,
            handler=lambda ctx, args: confirmation(
                args.model_dump(), "It costs credits.", "Render?"
            ),
            on_approved=_approved_saves,
        )
    )
    fake_model.script(Turn(tool_use("render_hero", {"name": "Mira"}, id="toolu_hero")))
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Render Mira"))["status"] == "awaiting"

    # Held, not carried out: the first run costs the weight only.
    [first] = metered(app, chat.user_id, 1)
    assert (first.billable_tool_calls, first.credits) == (0, HOST_WEIGHT)

    fake_model.script("Rendered Mira.")
    response = chat.answer(chat_id, "toolu_hero", {"approved": True})
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"

    second = metered(app, chat.user_id, 2)[1]
    assert second.idempotency_key == f"{chat_id}:chat:1"
    assert (second.billable_tool_calls, second.credits) == (1, HOST_WEIGHT + 1)


def test_a_run_the_model_never_answered_costs_nothing(app, chat, fake_model):
    fake_model.script(api_error(400, "invalid_request_error", "bad request"))
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id)
    assert chat.wait(chat.send(chat_id, "hello"))["status"] == "error"
    _wait_done(subscription)  # sent after metering would have happened
    assert usage_events(app) == []


def test_a_metering_failure_never_fails_the_run(app, chat, fake_model, caplog):
    with app.extensions["database"].session() as session:
        session.execute(sqlalchemy.text("DROP TABLE usage_events"))
        session.commit()
    fake_model.script("Still here.")
    chat_id = chat.new_chat()

    subscription = app.extensions["services"].hub.subscribe(chat_id)

    with caplog.at_level(logging.ERROR, logger="app.chat.loop"):
        run = chat.wait(chat.send(chat_id, "hello"))
        _wait_done(subscription)

    assert run["status"] == "completed"
    assert chat.rows(chat_id)[-1]["content"] == "Still here."
    assert "usage could not be metered" in caplog.text
