"""Where runs execute: a thread pool in the web process (the embedded default), or
Dramatiq workers on Redis (app/chat/worker.py). Both end in `execute_run`, through
`run_then_drain` (app/chat/queue_drain.py)."""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Protocol

from app.chat.run_services import RunServices
from app.telemetry import tracing

log = logging.getLogger(__name__)


class RunExecutor(Protocol):
    def submit(self, run_id: int) -> None: ...

    def shutdown(self) -> None: ...


class ThreadExecutor:
    def __init__(self, services: RunServices, max_workers: int):
        self.services = services
        self.pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="run")
        self.futures: dict[int, Future[str | None]] = {}

    def submit(self, run_id: int) -> None:
        from app.chat.queue_drain import run_then_drain

        # The run, then the chat's queue: its next message's run comes back here.
        # In the trace of the request (or run) that submitted it.
        work = tracing.carried(run_then_drain)
        future = self.pool.submit(work, self.services, run_id, self.submit)
        self.futures[run_id] = future
        future.add_done_callback(partial(self._done, run_id))

    def _done(self, run_id: int, future: Future[str | None]) -> None:
        self.futures.pop(run_id, None)
        if future.exception() is not None:
            log.error("run %s crashed outside the loop", run_id, exc_info=future.exception())

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=False)


def make_executor(services: RunServices) -> RunExecutor:
    if services.settings.run_executor == "dramatiq":
        from app.chat.worker import DramatiqExecutor

        return DramatiqExecutor(services.settings)
    return ThreadExecutor(services, services.settings.run_threads)
