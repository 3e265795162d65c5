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
from dramatiq.middleware import CurrentMessage

from app.chat.queue import queue_collector
from app.chat.run_queue import WakingRedisBroker
from app.chat.run_services import RunServices
from app.config import Settings
from app.heap import settle
from app.telemetry import metrics, tracing

log = logging.getLogger(__name__)

ACTOR_NAME = "run_chat"
# Dramatiq's worker timeout: how long an idle consumer waits for an enqueue's wake-up
# before fetching anyway (app/chat/run_queue.py), and how often an idle worker thread
# looks up to notice shutdown (a message wakes it at once). Far below the broker's
# heartbeat timeout (60 s), so an idle worker is never taken for a dead one.
IDLE_POLL_MS = 1_000

# The services of this worker process, set by `start_worker` before messages are consumed.
_services = None
# The actor, to enqueue a chat's next run (its queue's next message) from here.
_actor: dramatiq.Actor[[int], None] | None = None


def make_broker(settings: Settings) -> RedisBroker:
    if not settings.redis_url:
        raise RuntimeError("RUN_EXECUTOR=dramatiq needs REDIS_URL (the broker lives in Redis)")
    broker = WakingRedisBroker(url=settings.redis_url, namespace="loopdesk")
    broker.add_middleware(CurrentMessage())  # the run reads its message's trace context
    return broker


def _run_chat(run_id: int) -> None:
    from app.chat.queue_drain import run_then_drain

    if _services is None:
        raise RuntimeError("this process is not a worker: start it with `flask worker`")
    log.info("run %s: starting", run_id)
    message = CurrentMessage.get_current_message()
    with tracing.continued(message.options.get(tracing.MESSAGE_OPTION) if message else None):
        status = run_then_drain(_services, run_id, _enqueue)
    log.info("run %s: %s", run_id, status or "already claimed or finished")
    if status is None:
        from app.chat.runs import run_status

        with _services.database.session() as session:
            current = run_status(session, run_id)
        log.info("run %s is %s: message dropped", run_id, current or "unknown")


def _enqueue(run_id: int) -> None:
    """A run started here (a queued message sent next) goes to the workers as any other."""
    assert _actor is not None  # declared by start_worker before any message
    _actor.send_with_options(args=(run_id,), **tracing.message_options())


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
        # The message carries the request's trace context (W3C `traceparent`, when on).
        self.actor.send_with_options(args=(run_id,), **tracing.message_options())

    def shutdown(self) -> None:
        self.broker.close()


def start_worker(services: RunServices, threads: int) -> None:
    """Consume runs until SIGTERM or SIGINT (what `flask worker` calls)."""
    global _services, _actor
    from app.chat.stale import StaleSweeper
    from app.mcp.checker import McpListChecker

    _services = services
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    broker = make_broker(services.settings)
    _actor = declare_actor(broker, services.settings)
    # A worker is there to call the model: the SDK (imported at first use, app/llm/
    # client.py) and its client are made before the first run, not inside it.
    services.model.anthropic  # noqa: B018
    settle()  # and what it loaded leaves the collector's full passes (app/heap.py)
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
    # METRICS_ADDRESS: this process's runs, model calls and tools (its own address).
    exported = metrics.serve(
        services.settings.metrics_address, [queue_collector(services.database)]
    )
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
        if exported is not None:
            exported.shutdown()
        worker.stop()
        broker.close()
        services.close()
