"""Liveness with shortened timers: heartbeats keep a slow run alive, the stream idle
watchdog cuts a silent stream but forgives reasoning and tool calls, MAX_RUN_SECONDS ends
a run, and a run whose heartbeat stopped is reclaimed on read and by the sweep."""

from __future__ import annotations

import http.server
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from app.chat.models import Conversation, Run
from app.chat.stale import INTERRUPTED, StaleSweeper, sweep
from app.db import utcnow
from app.events import Done, Keepalive
from tests.factories import ChatDriver
from tests.fake_model import Turn, text, thinking, tool_use
from tests.waiting import eventually, scaled

TIMERS = dict(heartbeat_seconds=0.2, stale_seconds=1.5, stream_idle_seconds=0.8, max_run_seconds=30)


def _driver(make_app, fake_model, auth, **overrides) -> tuple:
    app = make_app(anthropic_base_url=fake_model.base_url, **{**TIMERS, **overrides})
    auth.app = app
    auth.client = app.test_client()
    auth.create()
    auth.login()
    return app, ChatDriver(app, auth.client, auth)


def _drain(subscription) -> list:
    events = []
    while (event := subscription.get(timeout=0.01)) is not None:
        events.append(event)
    return events


def test_a_slow_healthy_run_gets_heartbeats_and_keepalives_and_is_never_reclaimed(
    make_app, fake_model, auth
):
    app, chat = _driver(make_app, fake_model, auth)
    # About 3 s of steady streaming: twice STALE_SECONDS.
    fake_model.script(Turn(text("word " * 60), token_delay=0.05))
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id)
    run_id = chat.send(chat_id, "Take your time")
    # 40 of its 60 words streamed: 2 s at 50 ms a word, past STALE_SECONDS, 1 s still to go.
    hub = app.extensions["services"].hub
    eventually(
        lambda: hub.live_state(chat_id).text.count("word") >= 40,
        10,
        lambda: f"the run streamed only {hub.live_state(chat_id).text.count('word')} words",
    )
    # Readers during the run see it alive (the on-read check does not reclaim it).
    assert chat.client.get(f"/api/runs/{run_id}").get_json()["status"] == "running"
    with app.extensions["database"].session() as session:
        heartbeat = session.get(Run, run_id).heartbeat_at
    assert utcnow() - heartbeat < timedelta(seconds=1)

    run = chat.wait(run_id)

    assert run["status"] == "completed"
    keepalives = [e for e in _drain(subscription) if isinstance(e, Keepalive)]
    assert len(keepalives) >= 5
    assert {k.run_id for k in keepalives} == {run_id}
    assert [r["kind"] for r in chat.rows(chat_id)] == ["user", "host"]


def test_thinking_longer_than_the_idle_timeout_completes(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth, thinking_budget=2048)
    # Silent for 2.5 s inside the thinking block: three times STREAM_IDLE_SECONDS.
    fake_model.script(
        Turn(
            thinking("Let me weigh the offers carefully"),
            text("Here is my answer."),
            stall_after=1,
            stall_seconds=2.5,
        )
    )
    chat_id = chat.new_chat()

    run = chat.wait(chat.send(chat_id, "Think hard"), timeout=20)

    assert run["status"] == "completed", run
    assert chat.rows(chat_id)[-1]["content"] == "Here is my answer."


def test_a_stream_that_goes_silent_mid_text_is_aborted(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth)
    fake_model.script(
        Turn(text("I was about to say something important"), stall_after=3, stall_seconds=20)
    )
    chat_id = chat.new_chat()
    started = time.monotonic()

    run = chat.wait(chat.send(chat_id, "Hello?"), timeout=15)

    assert run["status"] == "error"
    assert time.monotonic() - started < 8  # cut by the watchdog, not the 20 s stall
    last = chat.rows(chat_id)[-1]
    assert last["kind"] == "error"
    assert "stopped responding" in last["content"]
    # The chat stays usable.
    fake_model.script(Turn(text("Back again.")))
    assert chat.wait(chat.send(chat_id, "Again"))["status"] == "completed"


class _SlowPage(http.server.BaseHTTPRequestHandler):
    delay = 2.0

    def do_GET(self):
        time.sleep(self.delay)
        body = b"<html><body><p>Spring sale: 20% off every plan.</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_site():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/sale"
    server.shutdown()
    server.server_close()


def test_a_tool_that_runs_longer_than_the_idle_timeout_does_not_trip_it(
    make_app, fake_model, auth, slow_site
):
    app, chat = _driver(make_app, fake_model, auth, fetch_allow_hosts=("127.0.0.1",))
    fake_model.script(
        Turn(tool_use("fetch_url", {"url": slow_site})),
        Turn(text("The sale is 20% off every plan.")),
    )
    chat_id = chat.new_chat()

    run = chat.wait(chat.send(chat_id, f"What does {slow_site} say?"), timeout=20)

    assert run["status"] == "completed", run
    assert chat.rows(chat_id)[-1]["content"] == "The sale is 20% off every plan."
    # The fetched page reached the model: the tool really ran (for 2 s) to the end.
    assert "20% off" in str(fake_model.requests[-1]["messages"][-1])


def test_a_run_past_max_run_seconds_ends(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth, max_run_seconds=1.5)
    # Never silent long enough for the idle watchdog, but 4 s long in all.
    fake_model.script(Turn(text("word " * 80), token_delay=0.05))
    chat_id = chat.new_chat()
    started = time.monotonic()

    run = chat.wait(chat.send(chat_id, "Go on and on"), timeout=15)

    assert run["status"] == "error"
    assert time.monotonic() - started < 3.5
    assert "took too long" in chat.rows(chat_id)[-1]["content"]


def test_no_keepalive_follows_the_runs_done(make_app, fake_model, auth):
    """The monitor lists the runs alive here, then beats them (database writes, then a
    keepalive each). A run that ends in between has published its Done by the time the
    beat publishes: its keepalive must not follow (a page would take the run as alive
    again). The monitor's tick is driven here, paused at that very moment."""
    app, chat = _driver(make_app, fake_model, auth)
    services = app.extensions["services"]
    monitor = services.liveness
    monitor.stop()  # no background ticks: this test makes the one that matters
    fake_model.script(Turn(text("word " * 20), token_delay=0.05))
    chat_id = chat.new_chat()
    subscription = services.hub.subscribe(chat_id)
    received: list = []
    done = threading.Event()
    fence = Keepalive(0)  # published last: everything before it has arrived with it

    def listen():
        deadline = time.monotonic() + scaled(15)
        while time.monotonic() < deadline:
            event = subscription.get(timeout=0.05)
            if event == fence:
                return
            if event is not None:
                received.append(event)
                if isinstance(event, Done):
                    done.set()

    listener = threading.Thread(target=listen)
    listener.start()
    run_id = chat.send(chat_id, "Hello")
    eventually(lambda: run_id in monitor._runs, 5, "the monitor never watched the run")
    database = monitor.database

    class ReachedAfterDone:
        """The monitor's database, answering only once the run has published Done."""

        def session(self):
            assert done.wait(10), "the run never finished"
            return database.session()

    beaten: list[int] = []
    beat = monitor.beat

    def recording_beat(watches):
        beaten.extend(w.run_id for w in watches)
        beat(watches)

    monitor.database = ReachedAfterDone()
    monitor.beat = recording_beat
    monitor._last_beat = monitor._last_cancel_poll = float("-inf")
    try:
        monitor.tick(time.monotonic())
    finally:
        monitor.database = database
    services.hub.publish(chat_id, fence)
    listener.join(10)

    assert run_id in beaten, "the beat did not see the run alive"
    kinds = [(type(e).__name__, getattr(e, "run_id", None)) for e in received]
    done_at = kinds.index(("Done", run_id))
    assert ("Keepalive", run_id) not in kinds[done_at:], kinds
    assert chat.wait(run_id)["status"] == "completed"


def _dead_run(app, chat, chat_id: int) -> int:
    """A run that a process started and then died with: running, heartbeat long gone."""
    with app.extensions["database"].session() as session:
        conversation = session.get(Conversation, chat_id)
        run = Run(conversation_id=chat_id, user_id=conversation.user_id, status="running")
        session.add(run)
        session.flush()
        stale = utcnow() - timedelta(seconds=60)
        run.started_at = run.heartbeat_at = stale
        conversation.status, conversation.active_run_id = "STREAMING", run.id
        session.commit()
        return run.id


def test_reading_a_conversation_whose_run_died_reclaims_it(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth)
    chat_id = chat.new_chat()
    run_id = _dead_run(app, chat, chat_id)

    rows = chat.rows(chat_id)

    assert rows[-1]["kind"] == "error"
    assert rows[-1]["content"] == INTERRUPTED
    assert chat.client.get(f"/api/runs/{run_id}").get_json()["status"] == "error"
    chats = chat.client.get("/api/chats").get_json()["chats"]
    assert chats[0]["status"] == "IDLE"
    # A second read adds nothing, and the next message runs normally.
    assert len(chat.rows(chat_id)) == len(rows)
    fake_model.script(Turn(text("Picking up where we left off.")))
    assert chat.wait(chat.send(chat_id, "Continue"))["status"] == "completed"


def test_the_chat_page_shows_the_interrupted_row_after_a_dead_run(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth)
    chat_id = chat.new_chat()
    _dead_run(app, chat, chat_id)

    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)

    assert "This reply was interrupted" in page


def test_the_sweep_reclaims_dead_runs_and_leaves_live_ones(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth)
    dead_chat, live_chat = chat.new_chat(), chat.new_chat()
    dead_run = _dead_run(app, chat, dead_chat)
    live_run = _dead_run(app, chat, live_chat)
    with app.extensions["database"].session() as session:
        session.execute(update(Run).where(Run.id == live_run).values(heartbeat_at=utcnow()))
        session.commit()
    services = app.extensions["services"]
    subscription = services.hub.subscribe(dead_chat)

    result = app.test_cli_runner().invoke(args=["sweep-stale"])

    assert result.exit_code == 0, result.output
    assert f"run {dead_run} in conversation {dead_chat}: interrupted" in result.output
    with app.extensions["database"].session() as session:
        statuses = dict(session.execute(select(Run.id, Run.status)).all())
        conversations = dict(session.execute(select(Conversation.id, Conversation.status)).all())
    assert statuses[dead_run] == "error" and statuses[live_run] == "running"
    assert conversations[dead_chat] == "IDLE" and conversations[live_chat] == "STREAMING"
    kinds = [type(e).__name__ for e in _drain(subscription)]
    assert "RowPersisted" in kinds and "Done" in kinds
    # Sweeping again finds nothing new.
    assert sweep(services.database, services.hub, services.settings.stale_seconds) == []


def test_a_heartbeat_never_holds_a_run_and_its_conversation_at_once(app, chat, database_url):
    """A run's own writes lock its conversation and then its run; a heartbeat that held the
    run while waiting for the conversation would deadlock with them on PostgreSQL. So the
    run's heartbeat lands while another transaction holds the conversation."""
    if database_url.startswith("sqlite"):
        pytest.skip("row locks: SQLite has one lock for the whole database")
    from app.chat.liveness import StreamWatch

    chat_id = chat.new_chat()
    database = app.extensions["database"]
    with database.session() as session:
        conversation = session.get(Conversation, chat_id)
        run = Run(conversation_id=chat_id, user_id=conversation.user_id, status="running")
        session.add(run)
        session.flush()
        conversation.active_run_id = run.id
        session.commit()
        run_id = run.id
    before = utcnow()
    holder = database.session()
    holder.execute(select(Conversation).where(Conversation.id == chat_id).with_for_update())
    beating = threading.Thread(
        target=app.extensions["services"].liveness.beat,
        args=([StreamWatch(run_id, chat_id, time.monotonic())],),
    )
    beating.start()
    try:

        def landed():
            with database.session() as reader:
                beat_at = reader.get(Run, run_id).heartbeat_at
            return beat_at is not None and beat_at >= before

        eventually(landed, 3.0, "the run's heartbeat waited for the conversation's lock")
    finally:
        holder.rollback()
        holder.close()
        beating.join(5)
    assert not beating.is_alive()


def test_a_process_releases_orphaned_chats_at_its_start_not_in_every_sweep(app, chat):
    """A chat left STREAMING with no run in flight (an older version's crash between two
    writes) is released by the sweep a process makes when it starts; its later sweeps
    leave that write out (it reads every conversation there is)."""
    services = app.extensions["services"]
    orphaned, later = chat.new_chat("Orphaned at start"), chat.new_chat("Orphaned later")

    def orphan(chat_id: int) -> None:
        with services.database.session() as session:
            session.execute(
                update(Conversation).where(Conversation.id == chat_id).values(status="STREAMING")
            )
            session.commit()

    def status(chat_id: int) -> str:
        with services.database.session() as session:
            return session.scalar(select(Conversation.status).where(Conversation.id == chat_id))

    orphan(orphaned)
    sweeper = StaleSweeper(services.database, services.hub, 0.6).start()  # sweeps every 0.2 s
    try:
        eventually(lambda: status(orphaned) == "IDLE", 5, "the start's sweep left the orphan")
        orphan(later)
        sweeps = sweeper.sweeps
        eventually(lambda: sweeper.sweeps >= sweeps + 2, 5, "the sweeper stopped sweeping")
        assert status(later) == "STREAMING"
    finally:
        sweeper.stop()
    assert sweep(services.database, services.hub, 90) == []  # as a process's start does
    assert status(later) == "IDLE"
