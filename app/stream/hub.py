"""The event hub: the loop publishes a conversation's events, sockets subscribe."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import defaultdict
from typing import Protocol

from app.chat.events import Event


class Hub(Protocol):
    def publish(self, conversation_id: int, event: Event) -> None: ...

    def subscribe(self, conversation_id: int) -> Subscription: ...


class Subscription:
    """One subscriber's bounded queue; a slow reader drops nothing it can't afford to."""

    def __init__(self, hub: LocalHub, conversation_id: int, maxsize: int = 10_000):
        self.hub = hub
        self.conversation_id = conversation_id
        self.queue: queue.Queue[Event] = queue.Queue(maxsize=maxsize)

    def get(self, timeout: float | None = None) -> Event | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.hub.unsubscribe(self)


class LocalHub:
    """In-process fan-out (the embedded default)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[int, set[Subscription]] = defaultdict(set)

    def publish(self, conversation_id: int, event: Event) -> None:
        with self._lock:
            subscribers = list(self._subscribers.get(conversation_id, ()))
        for subscription in subscribers:
            with contextlib.suppress(queue.Full):
                subscription.queue.put_nowait(event)

    def subscribe(self, conversation_id: int) -> Subscription:
        subscription = Subscription(self, conversation_id)
        with self._lock:
            self._subscribers[conversation_id].add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            subscribers = self._subscribers.get(subscription.conversation_id)
            if subscribers is not None:
                subscribers.discard(subscription)
                if not subscribers:
                    del self._subscribers[subscription.conversation_id]
