"""Work too heavy for the serving loop, done in an OS thread while the request waits.

Under gevent (`make run`, gunicorn's gevent workers) every request is a greenlet on one
loop: CPU work in one (a zip of a person's files, compressed) stalls every socket of the
process until it ends. `off_the_loop` runs it in a thread of a small pool of its own
(not the hub's, which also resolves host names): only the asking greenlet waits, and the
loop serves everyone else meanwhile (zlib and SQLite let go of the GIL as they work).
Elsewhere (Flask's threaded server, the tests) each request already has its own thread,
and the work runs there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from flask import current_app

T = TypeVar("T")
POOL_THREADS = 2  # heavy jobs at once per process; more wait their turn, off the loop
_pool = None
_pool_lock = threading.Lock()


def under_gevent() -> bool:
    try:
        from gevent import monkey
    except ImportError:
        return False
    return monkey.is_module_patched("threading")


def off_the_loop(function: Callable[..., T], *args) -> T:
    """`function(*args)`, with the app context, off the serving loop; its exception is
    raised here."""
    if not under_gevent():
        return function(*args)
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # werkzeug's proxy

    def in_app_context() -> T:
        with app.app_context():
            return function(*args)

    return _threadpool().apply(in_app_context)


def _threadpool():
    global _pool
    with _pool_lock:
        if _pool is None:
            from gevent.threadpool import ThreadPool

            _pool = ThreadPool(POOL_THREADS)
        return _pool
