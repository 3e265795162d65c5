"""The run queue on Redis: Dramatiq's Redis broker, with idle consumers woken by each
enqueue instead of polling.

Dramatiq's Redis consumer finds new messages by running its fetch script every few
milliseconds while idle (backing off up to the worker's timeout). Short, an idle worker
process costs Redis and itself a steady share of a core, and keeps costing it under load
(the script runs between messages too); long, a person waits up to that long before their
run starts. Here every enqueue also PUBLISHes a wake-up on the queue's channel; each
worker process listens on it, and its idle consumers wait for that wake-up (or, if it is
lost, for the timeout) instead of sleeping. So the timeout can be long, and a run still
starts as soon as it is enqueued."""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

import redis
from dramatiq import Message
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
from dramatiq.errors import ConnectionClosed

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 10.0
# How often the wake-up listener looks up from its connection to notice close().
LISTEN_POLL_SECONDS = 0.5


class WakingRedisBroker(RedisBroker):
    """A RedisBroker whose enqueues publish a wake-up and whose consumers wait for one."""

    def __init__(self, *, url: str, namespace: str) -> None:
        super().__init__(url=url, namespace=namespace)
        self._waiting: set[threading.Event] = set()
        self._waiting_lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._stopping = threading.Event()

    def wake_channel(self, queue_name: str) -> str:
        return f"{self.namespace}:{queue_name}.wake"

    def enqueue(self, message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        message = super().enqueue(message, delay=delay)
        if delay is None:  # (a delayed message waits in the delay queue, polled as ever)
            try:
                self.client.publish(self.wake_channel(message.queue_name), b"1")
            except redis.RedisError as error:
                # The message is queued: an idle worker finds it at its next poll.
                log.warning("run queue: the wake-up was not published (%s)", error)
        return message

    @property
    def consumer_class(self) -> type[_WakingConsumer]:
        return _WakingConsumer

    # -- the wake-up listener (worker processes) ----------------------------------------

    def wait_for_wake(self, event: threading.Event, seconds: float) -> None:
        """Until an enqueue's wake-up (or `seconds`). `event` is cleared by its consumer
        before it fetches, so a wake-up during the fetch is not missed."""
        with self._waiting_lock:
            self._waiting.add(event)
        try:
            event.wait(seconds)
        finally:
            with self._waiting_lock:
                self._waiting.discard(event)

    def listen_for_wakes(self, queue_name: str) -> None:
        """Start the thread that turns the queue's wake-ups into woken consumers."""
        self._listener = threading.Thread(
            target=self._listen,
            args=(self.wake_channel(queue_name),),
            name="run-queue-wake",
            daemon=True,
        )
        self._listener.start()

    def _listen(self, channel: str) -> None:
        failures = 0
        while not self._stopping.is_set():
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(channel)
                failures = 0
                while not self._stopping.is_set():
                    if pubsub.get_message(timeout=LISTEN_POLL_SECONDS) is not None:
                        self._wake_all()
            except (redis.RedisError, OSError) as error:
                failures += 1
                delay = random.uniform(0, min(MAX_BACKOFF_SECONDS, 0.1 * 2**failures))
                log.warning("run queue: wake-up listener lost Redis (%s); consumers poll", error)
                self._stopping.wait(delay)
            finally:
                pubsub.close()

    def _wake_all(self) -> None:
        with self._waiting_lock:
            waiting = list(self._waiting)
        for event in waiting:
            event.set()

    def close(self) -> None:
        self._stopping.set()
        self._wake_all()
        if self._listener is not None:
            self._listener.join(timeout=LISTEN_POLL_SECONDS + 1)  # it closes its connection
        super().close()


class _WakingConsumer(_RedisConsumer):
    """Dramatiq's Redis consumer, except that an empty fetch waits for a wake-up rather
    than sleeping a backoff."""

    def __init__(
        self, broker: WakingRedisBroker, queue_name: str, prefetch: int, timeout: int
    ) -> None:
        super().__init__(broker, queue_name, prefetch, timeout)
        self._woken = threading.Event()

    def __next__(self) -> Any:
        if not self.message_cache and self.outstanding_message_count < self.prefetch:
            self._woken.clear()  # from here on, an enqueue's wake-up ends the wait below
            try:
                self.message_cache = self.broker.do_fetch(
                    self.queue_name, self.prefetch - self.outstanding_message_count
                )
            except redis.ConnectionError as error:
                raise ConnectionClosed(error) from None
            if not self.message_cache:
                self.broker.wait_for_wake(self._woken, self.timeout / 1000)
                return None
        return super().__next__()
