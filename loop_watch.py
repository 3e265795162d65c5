"""gevent's blocking monitor, on wherever a gevent loop serves (`make run`, gunicorn's gevent
workers): one greenlet that holds the loop stalls every socket and request of the process,
so a block longer than MAX_BLOCKING_SECONDS is logged (logger `loopdesk.blocking`, WARNING)
with the stack that held the loop, and counted.

gevent's monitor thread checks every MAX_BLOCKING_SECONDS whether the loop switched
greenlets since its last look. Its own report would also list every thread and greenlet,
found by walking every object on the heap (gc), holding the GIL long enough in a large
process to block the loop itself: this monitor takes only the loop thread's stack. The
line is written by the loop once it runs again (under gevent a log handler's lock is a
greenlet lock, which the monitor thread should not wait on). A block that goes on is
reported again at each look: each report is one line and one count.
"""

from __future__ import annotations

import logging
import sys
import traceback
import warnings

MAX_BLOCKING_SECONDS = 0.1
log = logging.getLogger("loopdesk.blocking")
reported = 0  # blocks reported in this process


def watch_the_loop() -> None:
    """Turn the monitor on, in the process that serves (gunicorn.conf.py's post_fork): it
    starts with the hub's loop, or at once when this process's loop has already run
    (`make run` forks its worker from a process whose loop ran while loading the app)."""
    import gevent
    from gevent import _monitor
    from gevent._hub_local import get_hub_if_exists

    gevent.config.monitor_thread = True
    gevent.config.max_blocking_time = MAX_BLOCKING_SECONDS
    # The monitor would also watch memory, with psutil, which is not a dependency.
    warnings.filterwarnings("ignore", message="Unable to monitor memory usage")
    # The hub makes its monitor from this name when it starts one.
    _monitor.PeriodicMonitoringThread = _stack_only_monitor(_monitor.PeriodicMonitoringThread)
    hub = get_hub_if_exists()
    if hub is not None:
        hub.start_periodic_monitoring_thread()  # nothing when it runs already


def _stack_only_monitor(monitor_class):
    if getattr(monitor_class, "stack_only", False):
        return monitor_class

    class StackOnlyMonitor(monitor_class):
        stack_only = True

        def monitor_blocking(self, hub):
            """Runs in the monitor thread."""
            blocked = self._greenlet_tracer.did_block_hub(hub)
            if not blocked:
                return None
            frame = sys._current_frames().get(hub.thread_ident)
            stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
            global reported
            reported += 1
            hub.loop.run_callback_threadsafe(_log, repr(blocked[1]), stack)
            return blocked

    return StackOnlyMonitor


def _log(greenlet: str, stack: str) -> None:
    log.warning(
        "the event loop was blocked for over %d ms by %s\n%s",
        MAX_BLOCKING_SECONDS * 1000,
        greenlet,
        stack.rstrip(),
    )
