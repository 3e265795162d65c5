"""`make run`: ONE process upgrades the database, seeds the demo and serves, importing
the app once (three `flask` commands imported it three times: seconds each).

It serves as production does where gevent works (MAKE_RUN_SERVER=gunicorn, the default):
gunicorn with gunicorn.conf.py and its hooks, one gevent worker forked from this process
with the app already loaded. gevent must patch before anything else is imported (as in
gevent_worker.py), so the setting is read here before the app is; app/config.py reads it
again and refuses a wrong value. The worker watches its loop (gunicorn.conf.py's
post_fork, loop_watch.py): a block over 100 ms is logged with its stack.
MAKE_RUN_SERVER=flask: Flask's threaded server."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def _patch_gevent() -> bool:
    from dotenv import dotenv_values

    server = os.environ.get("MAKE_RUN_SERVER") or dotenv_values(ROOT / ".env").get(
        "MAKE_RUN_SERVER"
    )
    if (server or "gunicorn") != "gunicorn":
        return False
    try:
        import fcntl  # noqa: F401  (gunicorn runs on POSIX systems only)

        from gevent import monkey
    except ImportError:
        return False
    monkey.patch_all()
    return True


GEVENT = _patch_gevent()
if GEVENT:
    # gunicorn's worker and this process record metrics: files both write, summed on a
    # scrape (metrics_dir.py), chosen before prometheus_client is imported with the app.
    import metrics_dir

    metrics_dir.prepare()

from app import create_app  # noqa: E402
from app.cli import prepare_and_greet, serve_threaded  # noqa: E402


def serve_gunicorn(app) -> None:
    from gunicorn.app.base import Application

    class EmbeddedGunicorn(Application):
        """gunicorn.conf.py, then one gevent worker (whatever WEB_CONCURRENCY says: the
        thread executor's runs live in the worker that started them)."""

        def load_config(self):
            self.load_config_from_file(str(ROOT / "gunicorn.conf.py"))
            self.cfg.set("workers", 1)
            self.cfg.set("worker_class", "gevent")
            # One `make run` per checkout, and no `gunicornc` needed on a laptop: the
            # shared socket path in $HOME would clash between two checkouts.
            self.cfg.set("control_socket_disable", True)

        def load(self):
            return app

    import gevent

    # The worker is forked: it opens its own database connections, never this process's,
    # and greenlets started while loading (limits' memory storage starts a Timer) end
    # here first; one pending at the fork would run in both processes.
    app.extensions["database"].dispose()
    gevent.sleep(0.05)
    EmbeddedGunicorn().run()


def main() -> None:
    app = create_app()
    prepare_and_greet(app)
    if GEVENT and app.config["LOOPDESK"].make_run_server == "gunicorn":
        serve_gunicorn(app)
    else:
        serve_threaded(app)


if __name__ == "__main__":
    main()
