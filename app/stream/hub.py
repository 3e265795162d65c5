"""The event hub: runs publish a conversation's events (and a person's list updates);
sockets subscribe. Each subscriber has its own bounded queue, so a slow socket never
slows the run or the other sockets; one that falls too far behind is told to reconnect
and catch up from rows."""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from typing import Any, Protocol, TypeVar

from app.events import Event
from app.stream.live import LiveState

QUEUE_SIZE = 5_000


class Hub(Protocol):
    def publish(self, conversation_id: int, event: Event) -> None: ...

    def publish_user(self, user_id: int, event: Event) -> None: ...

    def subscribe(self, conversation_id: int, user_id: int | None = None) -> Subscription: ...

    def live_state(self, conversation_id: int) -> LiveState: ...

    def unsubscribe(self, subscription: Subscription) -> None: ...

    def close(self) -> None: ...


def _queue_class() -> type[queue.Queue[Event | None]]:
    """gevent's own queue under a gevent server or worker (a monkey-patched stdlib queue
    costs several times more per event), else the stdlib's. Both raise queue.Full and
    queue.Empty."""
    try:
        from gevent import monkey
    except ImportError:
        return queue.Queue
    if monkey.is_module_patched("threading"):
        from gevent.queue import Queue

        return Queue  # type: ignore[no-any-return]  # gevent is untyped
    return queue.Queue


class Subscription:
    def __init__(self, hub: Hub, conversation_id: int, user_id: int | None, snapshot: LiveState):
        self.hub = hub
        self.conversation_id = conversation_id
        self.user_id = user_id
        self.snapshot = snapshot
        # None in the queue is a wake-up (`wake`): `get` returns at once with no event.
        self.queue: queue.Queue[Event | None] = _queue_class()(maxsize=QUEUE_SIZE)
        self.overflowed = False

    def put(self, event: Event | None) -> None:
        try:
            self.queue.put_nowait(event)
        except queue.Full:
            self.overflowed = True

    def wake(self) -> None:
        """End a `get` waiting now (or the next one) without an event: the socket has
        something else to see to (its client spoke)."""
        self.put(None)

    def get(self, timeout: float | None = None) -> Event | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def drain(self) -> list[Event]:
        """Every event already waiting, without blocking. (Asked whether anything waits
        first: most batches are one event, and a raised queue.Empty costs more.)"""
        events = []
        while not self.queue.empty():
            try:
                event = self.queue.get_nowait()
            except queue.Empty:
                break
            if event is not None:
                events.append(event)
        return events

    def close(self) -> None:
        self.hub.unsubscribe(self)


class LocalHub:
    """In-process fan-out (the embedded default)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_conversation: dict[int, set[Subscription]] = defaultdict(set)
        self._by_user: dict[int, set[Subscription]] = defaultdict(set)
        self._live: dict[int, LiveState] = {}

    def publish(self, conversation_id: int, event: Event) -> None:
        # Delivered under the lock that applied it: two publishers at once reach every
        # socket in the order the live state took them (a put never blocks).
        with self._lock:
            live = self._live.get(conversation_id)
            if live is None:  # (not setdefault: that would build a state per event)
                live = self._live[conversation_id] = LiveState()
            live.apply(event)
            if live.run_id is None:
                self._live.pop(conversation_id, None)
            for subscription in self._by_conversation.get(conversation_id, ()):
                subscription.put(event)

    def publish_user(self, user_id: int, event: Event) -> None:
        with self._lock:
            subscribers = list(self._by_user.get(user_id, ()))
        for subscription in subscribers:
            subscription.put(event)

    def subscribe(self, conversation_id: int, user_id: int | None = None) -> Subscription:
        # Snapshot and registration under one lock: every event after the snapshot is queued.
        with self._lock:
            snapshot = self._live.get(conversation_id, LiveState()).copy()
            subscription = Subscription(self, conversation_id, user_id, snapshot)
            self._by_conversation[conversation_id].add(subscription)
            if user_id is not None:
                self._by_user[user_id].add(subscription)
        return subscription

    def live_state(self, conversation_id: int) -> LiveState:
        with self._lock:
            return self._live.get(conversation_id, LiveState()).copy()

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            forget(subscription, self._by_conversation, self._by_user)

    def close(self) -> None:
        """Nothing to release: subscriptions end with their sockets."""


S = TypeVar("S", bound=Subscription)


def forget(
    subscription: S,
    by_conversation: dict[int, set[S]],
    by_user: dict[int, set[S]],
) -> None:
    """Take a subscription out of a hub's indexes (the caller holds the hub's lock)."""
    indexes: tuple[tuple[dict[int, set[S]], Any], ...] = (
        (by_conversation, subscription.conversation_id),
        (by_user, subscription.user_id),
    )
    for index, key in indexes:
        subscribers = index.get(key)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del index[key]
