"""Keeping runs alive, and noticing when they are not. Three mechanisms, kept apart
(confusing them is how chats "randomly stop"):

- heartbeat: every HEARTBEAT_SECONDS while a run is alive in this process, its run and
  conversation are touched and a keepalive frame goes out, so a slow but healthy run is
  never reclaimed;
- stream idle watchdog: a model stream silent for STREAM_IDLE_SECONDS is aborted, except
  while the model is reasoning (between a thinking block's start and stop). Tool calls run
  with no stream open, so they never trip it. MAX_RUN_SECONDS bounds the whole run;
- staleness (app/chat/stale.py): a run whose heartbeat stopped is reclaimed by any process.

One monitor thread per process watches every run executing in it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import Any

from sqlalchemy import select, update

from app import events as ev
from app.chat.models import (
    Conversation,
    Run,
    RunStatus,
)
from app.config import Settings
from app.db import Database, utcnow

log = logging.getLogger(__name__)

# How soon a run notices a Stop pressed in another process.
CANCEL_POLL_SECONDS = 1.0


class StreamWatch:
    """One run's view for the watchdog: when its model stream last said anything, whether
    the silence is legitimate (reasoning), and how to cut the connection."""

    def __init__(self, run_id: int, conversation_id: int, started: float):
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.started = started
        self.last_activity = started
        self.streaming = False
        self.reasoning = 0
        self.aborted: str | None = None
        # Set when the run lets go of its watch, before it publishes Done; a keepalive is
        # published only under `keepalive_lock` while this is unset, so none follows Done.
        self.released = False
        self.keepalive_lock = threading.Lock()
        self._connection: Any = None
        self._lock = threading.Lock()

    # -- called by the model client, from the run's thread --------------------------------

    def stream_opened(self, response: Any) -> None:
        with self._lock:
            self._connection = response
            self.streaming = True
            self.reasoning = 0
            self.last_activity = time.monotonic()
        if self.aborted:
            self._cut()

    def stream_closed(self) -> None:
        with self._lock:
            self._connection = None
            self.streaming = False
            self.reasoning = 0

    def activity(self) -> None:
        self.last_activity = time.monotonic()

    def reasoning_started(self) -> None:
        self.reasoning += 1
        self.activity()

    def reasoning_ended(self) -> None:
        self.reasoning = max(0, self.reasoning - 1)
        self.activity()

    # -- called by the monitor ------------------------------------------------------------

    def idle_for(self, now: float) -> float:
        """Seconds of silence that count against the watchdog (0 while reasoning or when
        no stream is open)."""
        if not self.streaming or self.reasoning:
            return 0.0
        return now - self.last_activity

    def abort(self, reason: str) -> None:
        if self.aborted is None:
            self.aborted = reason
        self._cut()

    def cut(self) -> None:
        """The run was stopped: end its model stream now, even one silent before its first
        token (the run reads the cut as its cancellation)."""
        self._cut()

    def _cut(self) -> None:
        """Shut the socket under the stream: the blocked read in the run's thread returns
        at once (closing alone would not wake it)."""
        with self._lock:
            response = self._connection
        if response is None:
            return
        stream = getattr(response, "extensions", {}).get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        else:
            response.close()


class LivenessMonitor:
    """The per-process thread: heartbeats for every run here, and the watchdog."""

    # `hub` and `cancellations` are app/chat/run_services.py's Publisher and Cancellations
    # (which names this class: typing them here would make the two modules a circle).
    def __init__(
        self, settings: Settings, database: Database, hub: Any, cancellations: Any
    ) -> None:
        self.settings = settings
        self.database = database
        self.hub = hub
        self.cancellations = cancellations
        self._last_cancel_poll = 0.0
        self._runs: dict[int, StreamWatch] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_beat = 0.0

    @property
    def tick_seconds(self) -> float:
        return max(
            0.05,
            min(
                self.settings.heartbeat_seconds,
                self.settings.stream_idle_seconds / 4,
                self.settings.max_run_seconds / 4,
                CANCEL_POLL_SECONDS / 2,
            ),
        )

    def watch(self, run_id: int, conversation_id: int) -> StreamWatch:
        watch = StreamWatch(run_id, conversation_id, time.monotonic())
        with self._lock:
            self._runs[run_id] = watch
            self._ensure_thread()
        return watch

    def release(self, run_id: int) -> None:
        """The run is ending: no keepalive of it is published once this returns (a beat
        publishing one right now is waited for), so its Done, published after, is last."""
        with self._lock:
            watch = self._runs.pop(run_id, None)
        if watch is not None:
            with watch.keepalive_lock:
                watch.released = True

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="liveness", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._wake.wait(self.tick_seconds):
            try:
                self.tick(time.monotonic())
            except Exception:
                log.exception("liveness tick failed")

    def tick(self, now: float) -> None:
        with self._lock:
            watches = list(self._runs.values())
        if not watches:
            return
        for watch in watches:
            self._police(watch, now)
        if now - self._last_cancel_poll >= CANCEL_POLL_SECONDS:
            self._last_cancel_poll = now
            self.poll_cancellations(watches)
        if now - self._last_beat >= self.settings.heartbeat_seconds:
            self._last_beat = now
            self.beat(watches)

    def _police(self, watch: StreamWatch, now: float) -> None:
        if watch.run_id in self.cancellations:
            watch.cut()
            return
        if now - watch.started >= self.settings.max_run_seconds:
            watch.abort("max_run")
        elif watch.idle_for(now) >= self.settings.stream_idle_seconds:
            log.warning("run %s: model stream silent, aborting it", watch.run_id)
            watch.abort("idle")

    def poll_cancellations(self, watches: list[StreamWatch]) -> None:
        """Stop pressed, or the chat deleted, in another process: one query for every run
        here. A run whose row is gone was deleted with its conversation."""
        run_ids = [w.run_id for w in watches]
        with self.database.session() as session:
            statuses = dict(
                session.execute(select(Run.id, Run.status).where(Run.id.in_(run_ids))).all()
            )
            session.commit()
        for run_id in run_ids:
            if statuses.get(run_id, RunStatus.CANCELLED) == RunStatus.CANCELLED:
                self.cancellations.add(run_id)

    def beat(self, watches: list[StreamWatch]) -> None:
        """One statement per table for every run alive here, then a keepalive each. Each
        statement commits on its own: a run's writes lock its conversation and then its run
        (a row, then the run's end), others the other way round, so a heartbeat holding
        both at once could deadlock with them on PostgreSQL."""
        watches = [w for w in watches if not w.released]
        if not watches:
            return
        run_ids = [w.run_id for w in watches]
        conversation_ids = [w.conversation_id for w in watches]
        now = utcnow()
        with self.database.session() as session:
            session.execute(update(Run).where(Run.id.in_(run_ids)).values(heartbeat_at=now))
            session.commit()
            session.execute(
                update(Conversation)
                # By id (`active_run_id` has no index: every conversation would be read).
                .where(
                    Conversation.id.in_(conversation_ids),
                    Conversation.active_run_id.in_(run_ids),
                )
                .values(updated_at=now)
            )
            session.commit()
        for watch in watches:
            # A run may have ended since the list was made (and published Done).
            with watch.keepalive_lock:
                if not watch.released:
                    self.hub.publish(watch.conversation_id, ev.Keepalive(watch.run_id))
