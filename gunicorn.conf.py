"""Production serving: `gunicorn -c gunicorn.conf.py wsgi:app` (README, "Scaling out").

gevent workers by default: every open socket and every model stream is a greenlet, so
one worker holds about a thousand sockets (FACTS.md: a thread per stream does not scale).
With GUNICORN_WORKER_CLASS=gthread, each socket holds one of GUNICORN_THREADS slots."""

import os
import sys

# Its neighbours (metrics_dir.py, loop_watch.py) import from wherever gunicorn starts.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import metrics_dir  # noqa: E402

# Before the app imports prometheus_client: every process records into this directory.
metrics_dir.prepare()

bind = os.environ.get("GUNICORN_BIND") or (
    f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '5000')}"
)
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gevent")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_connections = int(os.environ.get("GUNICORN_WORKER_CONNECTIONS", "1000"))
threads = int(os.environ.get("GUNICORN_THREADS", "64"))
# Sockets are long-lived; gevent workers keep answering the arbiter while they wait.
timeout = 60
graceful_timeout = 20
keepalive = 5
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
errorlog = "-"


def post_fork(server, worker):
    """A gevent worker logs every block of its loop over 100 ms, with its stack
    (loop_watch.py); the monitor must be on before the worker's loop first runs."""
    if "gevent" in type(worker).__module__:
        from loop_watch import MAX_BLOCKING_SECONDS, watch_the_loop

        watch_the_loop()
        worker.log.info(
            "blocks of the event loop over %d ms are logged with their stack "
            "(logger loopdesk.blocking)",
            MAX_BLOCKING_SECONDS * 1000,
        )


def post_worker_init(worker):
    """Every web process sweeps for stale runs (jittered; overlap is harmless), sends the
    scheduled messages that are due, makes its model client once it serves (the SDK
    is imported at first use, app/llm/client.py) and settles its heap (app/heap.py)."""
    from app.chat.stale import StaleSweeper
    from app.mcp.checker import McpListChecker

    services = worker.wsgi.extensions["services"]
    worker.stale_sweeper = StaleSweeper(
        services.database, services.hub, services.settings.stale_seconds
    ).start()
    worker.mcp_lists = McpListChecker(
        services.database, services.mcp, services.secrets, services.settings.fetch_allow_hosts
    ).start()
    # Scheduled messages (SCHEDULER=web): one scheduler a worker; the claim in the
    # database sends each tick once, however many there are.
    from app.cli.scheduler import start_in_process

    worker.scheduler = start_in_process(worker.wsgi)
    # What the worker loaded to serve, and the model SDK once imported, leave the garbage
    # collector's full passes (app/heap.py: they held the loop 70-290 ms each).
    from app.heap import settle

    settle()
    services.model.connect_soon(then=settle)


def when_ready(server):
    """METRICS_ADDRESS: the metrics, summed over every process, served once, by the master,
    without authentication (what the workers record; the queue's depth is read from the
    database by `GET /metrics`)."""
    address = metrics_dir.metrics_address()
    if address:
        server.metrics_server = metrics_dir.serve(address)
        server.log.info("Prometheus metrics at http://%s/metrics", address)


def child_exit(server, worker):
    """A worker's live gauges (its open sockets) stop counting with it."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    metrics_dir.remove_made()
