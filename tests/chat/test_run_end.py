"""The moment a run ends with the model's answer: its row and its end are one transaction,
so a Stop, a delete or a stale sweep landing just then leaves one clear outcome (no
doubled row, no error shown or logged, the usage metered once, the steps kept, the chat
usable), and what the run log counts is what the pages were sent."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy import text as sql

from app.billing.models import UsageEvent
from app.chat import context_window, run_end
from app.chat.models import Conversation, Run
from app.chat.stale import INTERRUPTED, sweep
from app.chat.stop import stop_active_run
from app.db import utcnow
from app.events import ConversationChanged
from app.tools.registry import ACTION, ToolInput, tool
from app.tools.results import ToolResult, confirmation
from tests.factories import ChatDriver, run_log_entries
from tests.fake_model import Turn, api_error, text, tool_use
from tests.waiting import eventually

ANSWER = "You have no offers yet; shall we add one?"


class AtTheAnswer:
    """Holds the run at its answer's transaction: just before it (`before=True`) or just
    after it (and before the frames that follow), while the test does something there."""

    def __init__(self, monkeypatch, before: bool = True):
        self.reached = threading.Event()
        self.go = threading.Event()
        answer = run_end.answer

        def held(*args):
            if before:
                self._hold()
            ended = answer(*args)
            if not before:
                self._hold()
            return ended

        monkeypatch.setattr(run_end, "answer", held)

    def _hold(self):
        self.reached.set()
        assert self.go.wait(10), "the test never let the run go on"

    def wait(self):
        assert self.reached.wait(10), "the run never reached its answer"

    def release(self):
        self.go.set()


def _tool_then_answer(fake_model):
    fake_model.script(
        Turn(text("Let me check your offers."), tool_use("list_offers", {})),
        Turn(text(ANSWER)),
    )


def _usage_events(app, run_id) -> int:
    with app.extensions["database"].session() as session:
        return len(session.scalars(select(UsageEvent).where(UsageEvent.run_id == run_id)).all())


def _drain(subscription) -> list:
    events = []
    while (event := subscription.get(timeout=0.05)) is not None:
        events.append(event)
    return events


def _events_until_done(subscription, run_id) -> list:
    events: list = []
    while not events or (events[-1].kind, getattr(events[-1], "run_id", None)) != ("done", run_id):
        event = subscription.get(timeout=10)
        assert event is not None, events
        events.append(event)
    return events


def _list_status(chat, chat_id) -> str:
    chats = chat.client.get("/api/chats").get_json()["chats"]
    return next(c["status"] for c in chats if c["id"] == chat_id)


def _sweep_as_stale(services, run_id) -> None:
    """The run's heartbeat made old enough for the staleness sweep, which reclaims it."""
    with services.database.session() as session:
        long_ago = utcnow() - timedelta(seconds=services.settings.stale_seconds * 2)
        session.execute(update(Run).where(Run.id == run_id).values(heartbeat_at=long_ago))
        session.commit()
    assert [r.run_id for r in sweep(services.database, services.hub, 1)] == [run_id]


def _assert_nothing_logged_as_failed(caplog):
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert not [r for r in caplog.records if r.exc_info], caplog.text


def test_stop_as_the_answer_is_written_keeps_one_row_and_ends_cancelled(
    app, chat, fake_model, monkeypatch, caplog
):
    """Stop lands after the answer streamed and before its row was written: the streamed
    text is kept once (by Stop, marked stopped), the run's own row never comes."""
    _tool_then_answer(fake_model)
    held = AtTheAnswer(monkeypatch)
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id, chat.user_id)
    run_id = chat.send(chat_id, "What do I sell?")
    future = app.extensions["executor"].futures[run_id]
    held.wait()

    stopped = chat.post(f"/api/chats/{chat_id}/stop", {}).get_json()
    held.release()

    assert stopped == {"stopped": True, "runId": run_id}
    assert future.result(timeout=10) == "cancelled"
    assert chat.wait(run_id)["status"] == "cancelled"
    rows = chat.rows(chat_id)
    assert [(r["kind"], r["content"], r.get("stopped")) for r in rows] == [
        ("user", "What do I sell?", None),
        ("host", "Let me check your offers.", None),
        ("host", ANSWER, True),
    ]
    # The run's step stays on its first shown row.
    assert [s["label"] for s in rows[1]["steps"]["items"]] == ["Looked up your offers"]
    assert _usage_events(app, run_id) == 1  # the model answered: metered, once
    assert _list_status(chat, chat_id) == "IDLE"
    events = _drain(subscription)
    dones = [e for e in events if e.kind == "done"]
    assert [d.status for d in dones] == ["cancelled"]
    listed = [e for e in events if isinstance(e, ConversationChanged)]
    assert listed and listed[-1].conversation["status"] == "IDLE"
    _assert_nothing_logged_as_failed(caplog)

    fake_model.script("Still none.")
    assert chat.wait(chat.send(chat_id, "And now?"))["status"] == "completed"
    assert fake_model.rejections == []


def test_stop_just_after_the_answer_is_written_finds_nothing_to_stop(
    app, chat, fake_model, monkeypatch
):
    _tool_then_answer(fake_model)
    held = AtTheAnswer(monkeypatch, before=False)
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "What do I sell?")
    held.wait()

    stopped = chat.post(f"/api/chats/{chat_id}/stop", {}).get_json()
    held.release()

    assert stopped == {"stopped": False, "runId": None}
    assert chat.wait(run_id)["status"] == "completed"
    rows = chat.rows(chat_id)
    assert [(r["kind"], r.get("stopped")) for r in rows] == [
        ("user", None),
        ("host", None),
        ("host", None),
    ]
    assert rows[-1]["content"] == ANSWER
    assert [s["label"] for s in rows[1]["steps"]["items"]] == ["Looked up your offers"]
    assert _usage_events(app, run_id) == 1
    assert _list_status(chat, chat_id) == "IDLE"


def test_a_chat_deleted_elsewhere_as_the_answer_is_written_ends_quietly(
    app, chat, fake_model, monkeypatch, caplog
):
    """Deleted by another process (this one's cancellations do not know yet): the answer's
    transaction finds the run gone; no error row, nothing logged as a failure."""
    fake_model.script(Turn(text(ANSWER)))
    held = AtTheAnswer(monkeypatch)
    kept_id = chat.new_chat()
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "What do I sell?")
    future = app.extensions["executor"].futures[run_id]
    held.wait()

    with app.extensions["database"].session() as session:
        session.delete(session.get(Conversation, chat_id))
        session.commit()
    held.release()

    assert future.result(timeout=10) == "cancelled"
    _assert_nothing_logged_as_failed(caplog)
    assert chat.client.get(f"/api/runs/{run_id}").status_code == 404
    assert [c["id"] for c in chat.client.get("/api/chats").get_json()["chats"]] == [kept_id]
    assert _usage_events(app, run_id) == 0
    assert run_id not in app.extensions["services"].liveness._runs


def test_a_run_the_sweep_reclaims_as_it_answers_ends_as_the_sweep_left_it(
    app, chat, fake_model, monkeypatch, caplog
):
    """The sweep took the run for dead just before its answer's transaction: the run
    writes nothing more, and every frame and its status say what the sweep said."""
    _tool_then_answer(fake_model)
    held = AtTheAnswer(monkeypatch)
    chat_id = chat.new_chat()
    services = app.extensions["services"]
    services.liveness.stop()  # no heartbeat of the run's to contradict the sweep
    subscription = services.hub.subscribe(chat_id)
    run_id = chat.send(chat_id, "What do I sell?")
    future = app.extensions["executor"].futures[run_id]
    held.wait()

    _sweep_as_stale(services, run_id)
    held.release()

    assert future.result(timeout=10) == "error"
    assert chat.wait(run_id)["status"] == "error"
    rows = chat.rows(chat_id)
    assert [(r["kind"], r["content"]) for r in rows] == [
        ("user", "What do I sell?"),
        ("host", "Let me check your offers."),
        ("error", INTERRUPTED),
    ]
    assert [s["label"] for s in rows[1]["steps"]["items"]] == ["Looked up your offers"]
    assert [e.status for e in _drain(subscription) if e.kind == "done"] == ["error", "error"]
    assert _usage_events(app, run_id) == 1
    assert _list_status(chat, chat_id) == "IDLE"
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    entries = run_log_entries(app, run_id)
    assert [e.kind for e in entries if e.kind not in ("frames", "model_call", "tool_call")] == []


def test_a_run_the_sweep_reclaimed_that_then_fails_adds_no_second_error(app, chat, fake_model):
    """Reclaimed while its model call was out, then the call failed: the person has the
    sweep's "interrupted" row, and only that."""
    services = app.extensions["services"]
    services.liveness.stop()  # no heartbeat of the run's to contradict the sweep
    swept = threading.Event()

    def refused_after_the_sweep(body):
        assert swept.wait(10)
        return api_error(400, "invalid_request_error", "Refused")

    fake_model.responder = refused_after_the_sweep
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "What do I sell?")
    fake_model.wait_for_requests(1)
    _sweep_as_stale(services, run_id)
    swept.set()

    assert chat.wait(run_id)["status"] == "error"
    entries = run_log_entries(app, run_id)
    assert [(r["kind"], r["content"]) for r in chat.rows(chat_id)] == [
        ("user", "What do I sell?"),
        ("error", INTERRUPTED),
    ]
    assert [e.data["code"] for e in entries if e.kind == "error"] == ["invalid_request_error"]
    assert _list_status(chat, chat_id) == "IDLE"


def _run_frames(events, run_id) -> Counter:
    """The frames the run itself sent: after the route's (the person's row and the
    working indicator), keepalives aside (the process's monitor sends those)."""
    started = next(i for i, e in enumerate(events) if e.kind == "status")
    return Counter(
        e.kind
        for e in events[started + 1 :]
        if e.kind != "keepalive" and getattr(e, "run_id", run_id) == run_id
    )


def _logged_frames(entries) -> Counter:
    counted: Counter = Counter()
    for entry in entries:
        if entry.kind == "frames":
            counted.update(entry.data["counts"])
    return counted


@pytest.mark.parametrize("tools", [False, True], ids=["plain answer", "tool then answer"])
def test_the_run_log_counts_the_frames_the_run_sent(app, chat, fake_model, tools):
    if tools:
        _tool_then_answer(fake_model)
    else:
        fake_model.script(Turn(text(ANSWER)))
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id)
    run_id = chat.send(chat_id, "What do I sell?")
    sent = _run_frames(_events_until_done(subscription, run_id), run_id)
    assert chat.wait(run_id)["status"] == "completed"
    entries = run_log_entries(app, run_id)

    assert sent["done"] == 1 and sent["message"] >= 1
    assert _logged_frames(entries) == sent
    calls = [e.kind for e in entries if e.kind != "frames"]
    assert calls == (["model_call", "tool_call", "model_call"] if tools else ["model_call"])
    with app.extensions["database"].session() as session:
        assert session.get(Run, run_id).iterations == (2 if tools else 1)


class HeroInput(ToolInput):
    name: str


def test_a_run_that_first_carries_out_an_approved_call_reads_its_request_after_it(
    app, chat, fake_model
):
    """The approved call runs before the first model call, so that call's request is read
    after it (with its result), and the log counts what was sent around it."""
    app.extensions["services"].tools.add(
        tool(
            name="save_hero",
            description="Save a hero (asks first).",
            category=ACTION,
            input=HeroInput,
            phase="discovery",
            handler=lambda ctx, args: confirmation(
                args.model_dump(), "It changes your workspace.", "Save?"
            ),
            on_approved=lambda ctx, args: ToolResult({"saved": args["name"]}),
        )
    )
    fake_model.script(Turn(text("I'll save her."), tool_use("save_hero", {"name": "Mira"})))
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Save Mira"))["status"] == "awaiting"
    card = chat.rows(chat_id)[-1]["card"]
    fake_model.script(Turn(text("Saved Mira.")))
    subscription = app.extensions["services"].hub.subscribe(chat_id)

    run_id = chat.answer(chat_id, card["toolUseId"], {"approved": True}).get_json()["runId"]
    sent = _run_frames(_events_until_done(subscription, run_id), run_id)

    assert chat.wait(run_id)["status"] == "completed"
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "Mira" in result["content"]
    assert sent["timeline"] == 2  # presenting: started, done
    assert _logged_frames(run_log_entries(app, run_id)) == sent
    with app.extensions["database"].session() as session:
        assert session.get(Run, run_id).iterations == 1
    assert fake_model.rejections == []


def test_a_failure_reading_the_first_request_ends_the_run_with_an_error_at_once(
    app, chat, fake_model, monkeypatch
):
    """The first request is read in the transaction that claims the run: when that read
    fails, the person is told at once (not left waiting for the stale sweep)."""
    fake_model.script("Never asked.")
    chat_id = chat.new_chat()
    real = context_window.build_system_prompt

    def broken(*args, **kwargs):
        raise RuntimeError("a broken prompt part")

    monkeypatch.setattr(context_window, "build_system_prompt", broken)
    run_id = chat.send(chat_id, "Hello")

    assert chat.wait(run_id, timeout=5)["status"] == "error"
    rows = chat.rows(chat_id)
    assert rows[-1]["kind"] == "error" and "Something went wrong" in rows[-1]["content"]
    assert fake_model.requests == []

    monkeypatch.setattr(context_window, "build_system_prompt", real)
    assert chat.wait(chat.send(chat_id, "Hello again"))["status"] == "completed"


def test_a_stop_from_another_process_as_the_answer_is_written_never_deadlocks(
    make_app, fake_model, auth, database_url, caplog
):
    """PostgreSQL, two app instances on one database: the Stop's transaction has updated
    the run (holding its row) when this process's answer transaction begins. Both take
    the run before the conversation, so the answer waits, then finds the run stopped;
    neither is chosen as a deadlock's victim."""
    if database_url.startswith("sqlite"):
        pytest.skip("row locks: SQLite has one lock for the whole database")
    here = make_app(anthropic_base_url=fake_model.base_url)
    elsewhere = make_app(anthropic_base_url=fake_model.base_url)
    here.extensions["services"].liveness.stop()  # no heartbeat waiting on the run's row
    auth.app, auth.client = here, here.test_client()
    auth.create()
    auth.login()
    chat = ChatDriver(here, auth.client, auth)
    answered = threading.Event()

    def after_the_lock(body):
        assert answered.wait(10)
        return Turn(text(ANSWER))

    fake_model.responder = after_the_lock
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "What do I sell?")
    future = here.extensions["executor"].futures[run_id]
    fake_model.wait_for_requests(1)

    stop = elsewhere.extensions["database"].session()
    try:
        stop.execute(select(Run.id).where(Run.id == run_id).with_for_update())
        answered.set()
        _wait_until_blocked_by(stop)
        stopped = stop_active_run(stop, elsewhere.extensions["services"].hub, chat_id)
        stop.commit()
    finally:
        stop.close()

    assert stopped is not None and stopped.run.id == run_id
    assert future.result(timeout=10) == "cancelled"
    _assert_nothing_logged_as_failed(caplog)
    rows = chat.rows(chat_id)
    assert [(r["kind"], r.get("stopped")) for r in rows][-1][1] is True
    assert [r for r in rows if r["kind"] == "host" and not r.get("stopped")] == []
    assert _list_status(chat, chat_id) == "IDLE"


def _wait_until_blocked_by(session, timeout=10.0):
    """Until another connection waits for a lock this session holds."""
    # pg_locks is read afresh by every query (pg_stat_activity is a per-transaction snapshot).
    blocked = sql(
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND :me = ANY(pg_blocking_pids(pid))"
    )
    me = session.execute(sql("SELECT pg_backend_pid()")).scalar()
    eventually(
        lambda: session.execute(blocked, {"me": me}).scalar(),
        timeout,
        "nothing waited for this session's locks",
    )


def test_deleting_a_chat_as_its_run_ends_never_deadlocks(app, chat, database_url):
    """PostgreSQL: the run's end has taken its run's row and is about to write its
    conversation when the person deletes the chat. The delete waits for the run's row
    before it takes the conversation, so both go through (neither fails as a deadlock's
    victim, the delete least of all)."""
    if database_url.startswith("sqlite"):
        pytest.skip("row locks: SQLite has one lock for the whole database")
    chat_id = chat.new_chat()
    database = app.extensions["database"]
    with database.session() as session:
        conversation = session.get(Conversation, chat_id)
        run = Run(conversation_id=chat_id, user_id=conversation.user_id, status="running")
        session.add(run)
        session.flush()
        conversation.status, conversation.active_run_id = "STREAMING", run.id
        session.commit()
        run_id = run.id
    ending = database.session()
    deleted: list = []
    try:
        ending.execute(update(Run).where(Run.id == run_id).values(status="completed"))
        deleting = threading.Thread(
            target=lambda: deleted.append(
                chat.client.post(f"/chats/{chat_id}/delete", headers=chat.auth.headers())
            )
        )
        deleting.start()
        _wait_until_blocked_by(ending)
        ending.execute(
            update(Conversation)
            .where(Conversation.id == chat_id)
            .values(status="IDLE", active_run_id=None)
        )
        ending.commit()
    finally:
        ending.close()
    deleting.join(10)
    assert deleted and deleted[0].status_code == 302
    assert chat.client.get("/api/chats").get_json()["chats"] == []
