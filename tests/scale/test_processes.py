"""Scale-out with real processes: two gunicorn web processes and a Dramatiq worker on
PostgreSQL and Redis; a worker killed mid-stream; the embedded server killed mid-stream
and restarted."""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from app.accounts.models import ApiToken
from app.accounts.service import create_user
from app.chat.stale import INTERRUPTED
from app.db import Database
from app.models import Base
from app.workspace.models import Offer
from tests.conftest import SERVICE_DATABASE_URL, SERVICE_REDIS_URL
from tests.fake_model import Turn, text, tool_use
from tests.scale.processes import (
    Api,
    Process,
    base_env,
    flask_serve,
    flask_worker,
    gunicorn_web,
)
from tests.telemetry import printed_spans
from tests.waiting import eventually

TIMERS = {"HEARTBEAT_SECONDS": "0.3", "STALE_SECONDS": "2", "STREAM_IDLE_SECONDS": "10"}
STALE_SECONDS = 2.0
# A reclaim happens one sweep (a third of STALE_SECONDS, jittered) after the run goes stale.
RECLAIM_WITHIN = STALE_SECONDS + 1.5

needs_services = pytest.mark.skipif(
    not (SERVICE_DATABASE_URL.startswith("postgresql") and SERVICE_REDIS_URL),
    reason="runs against the PostgreSQL and Redis of CI's second pass (DATABASE_URL, REDIS_URL)",
)


def _forget_unprefixed_rate_limits():
    """The processes started here are not the suite's apps: they count rate limits under no
    key prefix, as a deployment does, so one scale test's counters (a token's messages)
    would carry over to the next, and from one run to the next. The suite's own apps count
    under their process's prefix (tests/conftest.py), which starts with "test-"; one xdist
    worker runs this module's tests one after another (--dist loadfile)."""
    import redis

    client = redis.Redis.from_url(SERVICE_REDIS_URL)
    keys = [
        key
        for key in client.scan_iter(match="LIMITS:LIMITER/*", count=1000)
        if not key.startswith(b"LIMITS:LIMITER/test-")
    ]
    if keys:
        client.delete(*keys)
    client.close()


class Deployment:
    def __init__(self, tmp_path, database_url, model_url, **settings):
        if settings.get("REDIS_URL"):
            _forget_unprefixed_rate_limits()
        self.tmp_path = tmp_path
        self.database_url = database_url
        engine = create_engine(database_url)
        Base.metadata.create_all(engine)
        engine.dispose()
        self.env = base_env(tmp_path, database_url, model_url, **TIMERS, **settings)
        self.processes = []
        self.apis = []
        self.token, self.user_id, self.offer_id = self._user()

    def _user(self):
        database = Database(self.database_url)
        with database.session() as session:
            user = create_user(session, "ops@example.com", "correct horse battery")
            session.flush()
            token, raw = ApiToken.issue(user, "scale-test")
            offer = Offer(user_id=user.id, name="Calm Mornings", description="Coaching")
            session.add_all([token, offer])
            session.commit()
            ids = (raw, user.id, offer.id)
        database.dispose()
        return ids

    def start(self, process):
        self.processes.append(process)
        return process.start()

    def api(self, web) -> Api:
        self.apis.append(Api(web.url, self.token))
        return self.apis[-1]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log()}" for p in self.processes)

    def stop(self):
        for api in self.apis:
            api.close()
        for process in self.processes:
            process.stop()


@pytest.fixture
def deployment(tmp_path, database_url, fake_model):
    made = []

    def build(**settings):
        made.append(Deployment(tmp_path, database_url, fake_model.base_url, **settings))
        return made[-1]

    yield build
    for item in made:
        item.stop()


def _text_of(frames, run_id) -> str:
    return "".join(f["text"] for f in frames if f["type"] == "textDelta" and f["runId"] == run_id)


def _assert_rows_whole(rows):
    sequences = [r["sequence"] for r in rows]
    assert sequences == sorted(set(sequences)), sequences
    assert all(r["kind"] != "host" or r["content"] for r in rows)


@needs_services
def test_a_run_in_a_worker_streams_to_a_socket_on_the_other_web_process(deployment, fake_model):
    # Traced (printed on each process's output): one trace from request to worker to socket.
    setup = deployment(
        REDIS_URL=SERVICE_REDIS_URL, RUN_EXECUTOR="dramatiq", OTEL_TRACES_EXPORTER="console"
    )
    web_a = setup.start(gunicorn_web("web-a", setup.env, setup.tmp_path))
    web_b = setup.start(gunicorn_web("web-b", setup.env, setup.tmp_path))
    setup.start(flask_worker("worker", setup.env, setup.tmp_path))
    a, b = setup.api(web_a), setup.api(web_b)
    fake_model.script(
        Turn(text("Let me check which offer."), tool_use("select_offer", {"prompt": "Which?"})),
        Turn(text("Calm Mornings it is: a calm plan for busy mornings."), token_delay=0.01),
    )
    chat_id = a.post("/api/chats", {}).json()["id"]
    socket = b.socket(chat_id)

    first = a.post(f"/api/chats/{chat_id}/loop", {"message": "Plan a campaign"}).json()["runId"]
    card = socket.until(lambda f: f["type"] == "toolCall", timeout=30)
    socket.until(lambda f: f["type"] == "done" and f["runId"] == first)
    answer = {"toolUseId": card["toolUseId"], "result": {"offer_id": setup.offer_id}}
    response = b.post(f"/api/chats/{chat_id}/loop", {"toolResponse": answer})
    assert response.status_code == 202, response.text
    second = response.json()["runId"]
    done = socket.until(lambda f: f["type"] == "done" and f["runId"] == second, timeout=30)

    assert card["tool"] == "select_offer"
    assert _text_of(socket.frames, first) == "Let me check which offer."
    assert done["status"] == "completed", setup.logs()
    assert _text_of(socket.frames, second) == "Calm Mornings it is: a calm plan for busy mornings."
    rows = a.rows(chat_id)
    assert [r["kind"] for r in rows] == ["user", "card", "host"]
    assert rows[1]["card"]["status"] == "answered"
    assert b.get(f"/api/runs/{second}")["status"] == "completed"
    socket.close()
    _assert_one_trace_from_request_to_socket(setup.tmp_path)


def _assert_one_trace_from_request_to_socket(logs):
    """Each run's span, in the worker, is the child of the request that queued it, on
    either web process; the socket's span on web-b links to both runs (their frames came
    through the Redis hub)."""

    def printed():
        spans = printed_spans(*(logs / f"{name}.log" for name in ("web-a", "web-b", "worker")))
        runs = [s for s in spans if s["name"] == "invoke_agent loopdesk"]
        sockets = [s for s in spans if s["name"].startswith("GET /ws/")]
        return (spans, runs, sockets) if len(runs) == 2 and sockets else None

    spans, runs, (socket,) = eventually(printed, 20, "the spans were not all printed")
    by_id = {s["context"]["span_id"]: s for s in spans}
    for run in runs:
        request = by_id[run["parent_id"]]
        assert request["name"] == "POST /api/chats/<int:conversation_id>/loop"
        assert request["context"]["trace_id"] == run["context"]["trace_id"]
    linked = {link["context"]["span_id"] for link in socket["links"]}
    assert {run["context"]["span_id"] for run in runs} <= linked


@needs_services
def test_a_worker_killed_mid_stream_leaves_an_interrupted_reply_and_a_usable_chat(
    deployment, fake_model
):
    setup = deployment(REDIS_URL=SERVICE_REDIS_URL, RUN_EXECUTOR="dramatiq")
    web_a = setup.start(gunicorn_web("web-a", setup.env, setup.tmp_path))
    web_b = setup.start(gunicorn_web("web-b", setup.env, setup.tmp_path))
    worker = setup.start(flask_worker("worker", setup.env, setup.tmp_path))
    a, b = setup.api(web_a), setup.api(web_b)
    fake_model.script(Turn(text("word " * 300), token_delay=0.05))
    chat_id = a.post("/api/chats", {}).json()["id"]
    socket = b.socket(chat_id)
    run_id = a.post(f"/api/chats/{chat_id}/loop", {"message": "Write at length"}).json()["runId"]
    socket.until(lambda f: f["type"] == "textDelta", timeout=30)

    worker.kill()
    killed = time.monotonic()
    # No one reads the chat: the web processes' sweep finds the run and tells the socket.
    interrupted = socket.until(
        lambda f: f["type"] == "message" and f["row"]["kind"] == "error", timeout=15
    )
    reclaimed_after = time.monotonic() - killed

    assert reclaimed_after <= RECLAIM_WITHIN, reclaimed_after
    assert interrupted["row"]["content"] == INTERRUPTED
    assert a.chat_status(chat_id) == "IDLE"
    assert b.get(f"/api/runs/{run_id}")["status"] == "error"
    rows = a.rows(chat_id)
    assert [r["kind"] for r in rows] == ["user", "error"]
    _assert_rows_whole(rows)

    # A new worker; the next message runs normally.
    worker_2 = setup.start(flask_worker("worker-2", setup.env, setup.tmp_path))
    fake_model.script(Turn(text("Here is the short version.")))
    next_run = b.post(f"/api/chats/{chat_id}/loop", {"message": "Shorter please"}).json()["runId"]
    done = socket.until(lambda f: f["type"] == "done" and f["runId"] == next_run, timeout=30)
    assert done["status"] == "completed", setup.logs()
    rows = a.rows(chat_id)
    assert [r["kind"] for r in rows] == ["user", "error", "user", "host"]
    _assert_rows_whole(rows)

    # The killed run's message delivered again (as the broker would) is dropped.
    from app.chat.worker import DramatiqExecutor
    from app.config import load_settings

    executor = DramatiqExecutor(load_settings(env=setup.env))
    executor.submit(run_id)
    executor.submit(next_run)
    # The worker says so once it has read each message and looked at the run.
    dropped = [
        f"run {run_id} is error: message dropped",
        f"run {next_run} is completed: message dropped",
    ]
    eventually(
        lambda: all(line in worker_2.log() for line in dropped),
        10,
        lambda: f"the worker did not drop both messages:\n{setup.logs()}",
    )
    executor.shutdown()
    assert a.rows(chat_id) == rows
    assert b.get(f"/api/runs/{run_id}")["status"] == "error"
    assert b.get(f"/api/runs/{next_run}")["status"] == "completed"


def test_the_embedded_server_killed_mid_stream_and_restarted(deployment, fake_model):
    settings = {"RUN_EXECUTOR": "thread"}
    if SERVICE_REDIS_URL:
        settings["REDIS_URL"] = SERVICE_REDIS_URL
    setup = deployment(**settings)
    web = setup.start(flask_serve("web", setup.env, setup.tmp_path))
    api = setup.api(web)
    fake_model.script(Turn(text("word " * 300), token_delay=0.05))
    chat_id = api.post("/api/chats", {}).json()["id"]
    socket = api.socket(chat_id)
    run_id = api.post(f"/api/chats/{chat_id}/loop", {"message": "Write at length"}).json()["runId"]
    socket.until(lambda f: f["type"] == "textDelta", timeout=30)

    web.kill()
    killed = time.monotonic()
    port = web.url.rsplit(":", 1)[1]
    restarted = setup.start(flask_serve("web-restarted", setup.env, setup.tmp_path, int(port)))
    api = setup.api(restarted)
    # Reclaimed by the restarted server's first sweep, or STALE_SECONDS after the kill if
    # the restart was quicker than that. Nobody reads the chat's rows meanwhile.
    eventually(
        lambda: api.chat_status(chat_id) == "IDLE",
        max(killed + RECLAIM_WITHIN - time.monotonic(), 1.0),
        lambda: f"the killed run was not reclaimed:\n{setup.logs()}",
    )

    rows = api.rows(chat_id)
    assert [r["kind"] for r in rows] == ["user", "error"]
    assert rows[-1]["content"] == INTERRUPTED
    assert api.get(f"/api/runs/{run_id}")["status"] == "error"
    _assert_rows_whole(rows)
    fake_model.script(Turn(text("Back, and brief.")))
    next_run = api.post(f"/api/chats/{chat_id}/loop", {"message": "Again"}).json()["runId"]
    eventually(
        lambda: api.get(f"/api/runs/{next_run}")["status"] not in ("queued", "running"),
        20,
        f"run {next_run} never ended",
    )
    assert api.get(f"/api/runs/{next_run}")["status"] == "completed"
    assert [r["kind"] for r in api.rows(chat_id)] == ["user", "error", "user", "host"]


@needs_services
def test_stop_on_one_web_process_cancels_a_run_in_the_worker(deployment, fake_model):
    setup = deployment(REDIS_URL=SERVICE_REDIS_URL, RUN_EXECUTOR="dramatiq")
    web_a = setup.start(gunicorn_web("web-a", setup.env, setup.tmp_path))
    web_b = setup.start(gunicorn_web("web-b", setup.env, setup.tmp_path))
    setup.start(flask_worker("worker", setup.env, setup.tmp_path))
    a, b = setup.api(web_a), setup.api(web_b)
    fake_model.script(Turn(text("word " * 300), token_delay=0.05))
    chat_id = a.post("/api/chats", {}).json()["id"]
    socket = a.socket(chat_id)
    run_id = a.post(f"/api/chats/{chat_id}/loop", {"message": "Write at length"}).json()["runId"]
    socket.until(lambda f: f["type"] == "textDelta", timeout=30)
    # A few words shown (the Redis live state holds them), then Stop from the other process.
    socket.until(lambda f: f["type"] == "textDelta" and "word" in f["text"], timeout=30)

    stopped = b.post(f"/api/chats/{chat_id}/stop", {})
    done = socket.until(lambda f: f["type"] == "done" and f["runId"] == run_id, timeout=10)

    assert stopped.status_code == 200 and stopped.json()["runId"] == run_id
    assert done["status"] == "cancelled"
    assert a.get(f"/api/runs/{run_id}")["status"] == "cancelled"
    assert a.chat_status(chat_id) == "IDLE"
    # Web b kept what the socket had shown (the run's live state, in Redis), marked stopped.
    kept = a.rows(chat_id)[1]
    assert (kept["kind"], kept["stopped"]) == ("host", True)
    assert kept["content"].startswith("word")
    # The worker stopped streaming: no text after the done frame, and the chat is usable.
    fake_model.script(Turn(text("Short one.")))
    next_run = b.post(f"/api/chats/{chat_id}/loop", {"message": "Shorter"}).json()["runId"]
    done = socket.until(lambda f: f["type"] == "done" and f["runId"] == next_run, timeout=30)
    assert done["status"] == "completed"
    frames = socket.frames
    last_text = max(i for i, f in enumerate(frames) if f["type"] == "textDelta")
    first_done = next(i for i, f in enumerate(frames) if f["type"] == "done")
    assert frames[last_text]["runId"] == next_run  # nothing of the stopped run after it ended
    assert all(f["runId"] != run_id for f in frames[first_done:] if f["type"] == "textDelta")


@needs_services
def test_a_worker_sends_the_queued_message_when_the_reply_completes(deployment, fake_model):
    """The queue drains in the worker that ran the run: it enqueues the next run."""
    setup = deployment(REDIS_URL=SERVICE_REDIS_URL, RUN_EXECUTOR="dramatiq")
    web = setup.start(gunicorn_web("web-a", setup.env, setup.tmp_path))
    setup.start(flask_worker("worker", setup.env, setup.tmp_path))
    api = setup.api(web)
    fake_model.script(Turn(text("word " * 200), token_delay=0.03), "The headline.")
    chat_id = api.post("/api/chats", {}).json()["id"]
    socket = api.socket(chat_id)
    first = api.post(f"/api/chats/{chat_id}/loop", {"message": "Write at length"}).json()["runId"]
    socket.until(lambda f: f["type"] == "textDelta", timeout=30)

    queued = api.post(f"/api/chats/{chat_id}/loop", {"message": "A headline", "when": "after"})

    assert queued.status_code == 202 and queued.json()["queued"] is True
    socket.until(lambda f: f["type"] == "queue" and f["items"], timeout=10)
    socket.until(lambda f: f["type"] == "done" and f["runId"] == first, timeout=30)
    drained = socket.until(lambda f: f["type"] == "queue" and f["items"] == [], timeout=30)
    assert drained is not None
    second = socket.until(lambda f: f["type"] == "done" and f["runId"] != first, timeout=30)
    assert second["status"] == "completed", setup.logs()
    rows = api.rows(chat_id)
    assert [(r["kind"], r["content"]) for r in rows][2:] == [
        ("user", "A headline"),
        ("host", "The headline."),
    ]


class SchedulerProcess(Process):
    """`flask scheduler`: ready once it says it is sending."""

    def __init__(self, name: str, argv: list[str], env: dict, log_dir: Path):
        super().__init__(name, argv, env, log_dir, None)

    def _ready(self) -> bool:
        return "Sending scheduled messages" in self.log()


@needs_services
def test_two_scheduler_processes_send_a_due_message_once_to_the_worker(deployment, fake_model):
    """Scaled out: web processes that leave scheduling to `flask scheduler` (two of them,
    racing every second), a Dramatiq worker that runs what they send, a socket that sees
    the scheduled message answered, and the tick sent once."""
    from sqlalchemy import func, select, update

    from app.chat.models import Message, Run
    from app.chat.schedule_models import ChatSchedule

    setup = deployment(REDIS_URL=SERVICE_REDIS_URL, RUN_EXECUTOR="dramatiq", SCHEDULER="apart")
    web = setup.start(gunicorn_web("web", setup.env, setup.tmp_path))
    setup.start(flask_worker("worker", setup.env, setup.tmp_path))
    argv = [str(Path(sys.executable).parent / "flask"), "--app", "wsgi", "scheduler"]
    for name in ("scheduler-a", "scheduler-b"):
        setup.start(SchedulerProcess(name, [*argv, "--every", "1"], setup.env, setup.tmp_path))
    api = setup.api(web)
    fake_model.script(Turn(text("Here is this morning's digest.")))
    chat_id = api.post("/api/chats", {}).json()["id"]
    made = api.post(
        f"/api/chats/{chat_id}/schedules",
        {"when": "every day at 9:00", "message": "Morning digest", "timezone": "Europe/Paris"},
    )
    assert made.status_code == 201, made.text
    socket = api.socket(chat_id)
    database = Database(setup.database_url)
    with database.session() as session:  # due now: as if 9:00 had just struck
        session.execute(update(ChatSchedule).values(next_run_at=datetime(2020, 1, 1)))
        session.commit()

    done = socket.until(lambda f: f["type"] == "done", timeout=30)

    assert done["status"] == "completed", setup.logs()
    rows = api.rows(chat_id)
    assert [(r["kind"], r["content"]) for r in rows] == [
        ("user", "Morning digest"),
        ("host", "Here is this morning's digest."),
    ]
    with database.session() as session:
        schedule = session.scalars(select(ChatSchedule)).one()
        assert schedule.next_run_at > datetime(2025, 1, 1) and schedule.last_error is None
        assert session.scalar(select(func.count(Run.id))) == 1
        assert session.scalar(select(func.count(Message.id)).where(Message.kind == "user")) == 1
    database.dispose()
