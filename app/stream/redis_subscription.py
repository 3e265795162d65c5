"""A socket's subscription on the Redis hub (app/stream/redis_hub.py): what arrives before
its snapshot is read waits aside, then whatever the snapshot already holds is skipped."""

from __future__ import annotations

import json
import logging
import threading

from app import events as ev
from app.stream.hub import QUEUE_SIZE, Hub, Subscription
from app.stream.live import LiveState
from app.telemetry import tracing

log = logging.getLogger(__name__)


class RedisSubscription(Subscription):
    """A socket's subscription. Messages arriving before the snapshot is read wait aside;
    then those already in the snapshot (numbered at or below its counter) are skipped."""

    def __init__(self, hub: Hub, conversation_id: int, user_id: int | None):
        super().__init__(hub, conversation_id, user_id, LiveState())
        self.snapshot_seq: int | None = None
        # Set once Redis confirmed the subscription: from then on a dropped connection is a
        # gap this subscriber must be told about.
        self.listening = False
        self._early: list[tuple[int | None, ev.Event]] = []
        self.channels: list[bytes] = []
        self._lock = threading.Lock()
        # The socket's span (current where it subscribes), linked to the runs it hears.
        self.links = tracing.SpanLinks()

    def deliver(self, seq: int | None, event: ev.Event) -> None:
        """From the listener. `seq` is None for the person's events (never in a snapshot)."""
        with self._lock:
            if self.snapshot_seq is None:
                if len(self._early) < QUEUE_SIZE:
                    self._early.append((seq, event))
                else:
                    self.overflowed = True
                return
            if seq is None or seq > self.snapshot_seq:
                self.put(event)

    def start(self, snapshot: LiveState, snapshot_seq: int) -> None:
        with self._lock:
            self.snapshot = snapshot
            self.snapshot_seq = snapshot_seq
            early, self._early = self._early, []
            for seq, event in early:
                if seq is None or seq > snapshot_seq:
                    self.put(event)


def parse_event(data: bytes) -> ev.Event | None:
    """An event from its wire JSON; None (logged) for anything else."""
    try:
        return ev.from_wire(json.loads(data))
    except (ValueError, KeyError, TypeError):
        log.warning("hub: skipped a message that is not an event")
        return None
