"""Production serving: `gunicorn -c gunicorn.conf.py wsgi:app` (README, "Scaling out").

gevent workers by default: every open socket and every model stream is a greenlet, so
one worker holds about a thousand sockets (FACTS.md: a thread per stream does not scale).
With GUNICORN_WORKER_CLASS=gthread, each socket holds one of GUNICORN_THREADS slots."""

import os

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
    """Every web process sweeps for stale runs (jittered; overlap is harmless), and makes
    its model client once it serves (the SDK is imported at first use, app/llm/client.py)."""
    from app.chat.stale import StaleSweeper
    from app.mcp.checker import McpListChecker

    services = worker.wsgi.extensions["services"]
    worker.stale_sweeper = StaleSweeper(
        services.database, services.hub, services.settings.stale_seconds
    ).start()
    worker.mcp_lists = McpListChecker(
        services.database, services.mcp, services.secrets, services.settings.fetch_allow_hosts
    ).start()
    services.model.connect_soon()
