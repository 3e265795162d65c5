"""Runs in Dramatiq workers (RUN_EXECUTOR=dramatiq): the web process enqueues a run id on
Redis; any worker process claims it (compare-and-set, so a message delivered twice runs
once) and drives it, streaming frames back over the Redis hub to whichever web process
holds the socket."""

from __future__ import annotations

import logging
import signal
import threading

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from app.chat.run_queue import WakingRedisBroker
from app.chat.run_services import RunServices
from app.config import Settings

log = logging.getLogger(__name__)

ACTOR_NAME = "run_chat"
# Dramatiq's worker timeout: how long an idle consumer waits for an enqueue's wake-up
# before fetching anyway (app/chat/run_queue.py), and how often an idle worker thread
# looks up to notice shutdown (a message wakes it at once). Far below the broker's
# heartbeat timeout (60 s), so an idle worker is never taken for a dead one.
IDLE_POLL_MS = 1_000

# The services of this worker process, set by `start_worker` before messages are consumed.
_services = None


def make_broker(settings: Settings) -> RedisBroker:
    if not settings.redis_url:
        raise RuntimeError("RUN_EXECUTOR=dramatiq needs REDIS_URL (the broker lives in Redis)")
    return WakingRedisBroker(url=settings.redis_url, namespace="loopdesk")


def _run_chat(run_id: int) -> None:
    from app.chat.loop import execute_run

    if _services is None:
        raise RuntimeError("this process is not a worker: start it with `flask worker`")
    log.info("run %s: starting", run_id)
    status = execute_run(_services, run_id)
    log.info("run %s: %s", run_id, status or "already claimed or finished")
    if status is None:
        from app.chat.runs import run_status

        with _services.database.session() as session:
            current = run_status(session, run_id)
        log.info("run %s is %s: message dropped", run_id, current or "unknown")


def declare_actor(broker: RedisBroker, settings: Settings) -> dramatiq.Actor[[int], None]:
    """The one actor. No retries: a failed run has told the person already, and a run
    that died mid-way is reclaimed by the staleness sweep, never replayed."""
    return dramatiq.Actor(
        _run_chat,
        broker=broker,
        actor_name=ACTOR_NAME,
        queue_name=settings.run_queue,
        priority=0,
        options={
            "max_retries": 0,
            "time_limit": int((settings.max_run_seconds + 60) * 1000),
        },
    )


class DramatiqExecutor:
    """The web side: enqueue and answer at once."""

    def __init__(self, settings: Settings):
        self.broker = make_broker(settings)
        self.actor = declare_actor(self.broker, settings)

    def submit(self, run_id: int) -> None:
        self.actor.send(run_id)

    def shutdown(self) -> None:
        self.broker.close()


def start_worker(services: RunServices, threads: int) -> None:
    """Consume runs until SIGTERM or SIGINT (what `flask worker` calls)."""
    global _services
    from app.chat.stale import StaleSweeper
    from app.mcp.checker import McpListChecker

    _services = services
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    broker = make_broker(services.settings)
    declare_actor(broker, services.settings)
    # A worker is there to call the model: the SDK (imported at first use, app/llm/
    # client.py) and its client are made before the first run, not inside it.
    services.model.anthropic  # noqa: B018
    broker.listen_for_wakes(services.settings.run_queue)
    worker = dramatiq.Worker(
        broker,
        queues={services.settings.run_queue},
        worker_threads=threads,
        worker_timeout=IDLE_POLL_MS,
    )
    sweeper = StaleSweeper(services.database, services.hub, services.settings.stale_seconds)
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    lists = McpListChecker(
        services.database, services.mcp, services.secrets, services.settings.fetch_allow_hosts
    )
    worker.start()
    sweeper.start()
    lists.start()
    log.warning(
        "worker consuming %s with %d threads; database %s",
        services.settings.run_queue,
        threads,
        services.database.engine.url.render_as_string(hide_password=True),
    )
    try:
        stopping.wait()
    finally:
        sweeper.stop()
        lists.stop()
        worker.stop()
        broker.close()
        services.close()
