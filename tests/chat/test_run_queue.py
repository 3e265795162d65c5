"""The run queue on Redis (app/chat/run_queue.py): an idle worker's consumer is woken by
the web process's enqueue, so it can poll rarely and still start a run at once. Real
Redis, real Dramatiq messages."""

from __future__ import annotations

import threading

import dramatiq
import pytest
import redis

from app.chat.run_queue import WakingRedisBroker
from tests.factories import REDIS_URL, needs_redis
from tests.waiting import eventually

# Far longer than any test waits: a consumer that returns sooner was woken.
LONG_POLL_MS = 120_000

pytestmark = needs_redis


@pytest.fixture
def brokers(redis_namespace):
    made = []

    def make() -> WakingRedisBroker:
        broker = WakingRedisBroker(url=REDIS_URL, namespace=redis_namespace)
        made.append(broker)
        return broker

    yield make
    for broker in made:
        broker.close()


def _message(queue: str, run_id: int) -> dramatiq.Message:
    return dramatiq.Message(
        queue_name=queue, actor_name="run_chat", args=(run_id,), kwargs={}, options={}
    )


def _take(consumer, run_id: int) -> None:
    """The next message is the run's; acknowledged, the consumer closed."""
    message = next(consumer)
    assert message is not None and message.args == (run_id,)
    consumer.ack(message)
    consumer.close()


def _next_in_thread(consumer) -> tuple[threading.Thread, list]:
    got: list = []
    thread = threading.Thread(target=lambda: got.append(next(consumer)), daemon=True)
    thread.start()
    return thread, got


def _subscribed(broker: WakingRedisBroker, queue: str) -> None:
    """Until the listener's SUBSCRIBE is in effect (Redis counts the channel's subscribers)."""
    client = redis.Redis.from_url(REDIS_URL)
    channel = broker.wake_channel(queue)
    try:
        eventually(
            lambda: dict(client.pubsub_numsub(channel)).get(channel.encode(), 0) > 0,
            5,
            "the wake-up listener never subscribed",
        )
    finally:
        client.close()


def test_an_idle_consumer_is_woken_by_an_enqueue_in_another_process(brokers):
    queue = "runs"
    worker_broker, web_broker = brokers(), brokers()
    worker_broker.declare_queue(queue)
    worker_broker.listen_for_wakes(queue)
    _subscribed(worker_broker, queue)
    consumer = worker_broker.consume(queue, prefetch=4, timeout=LONG_POLL_MS)

    waiting, got = _next_in_thread(consumer)  # the queue is empty: it waits
    waiting.join(0.3)
    assert waiting.is_alive(), "an empty queue should leave the consumer waiting"

    web_broker.enqueue(_message(queue, 41))
    waiting.join(30)
    assert not waiting.is_alive(), "the enqueue's wake-up did not end the consumer's wait"
    assert got == [None]  # woken: it returns to its worker loop, then fetches
    _take(consumer, 41)


def test_without_the_wake_up_the_message_is_found_at_the_next_poll(brokers):
    """A lost wake-up (no listener, or Redis dropped the PUBLISH) costs at most one poll."""
    queue = "runs"
    worker_broker, web_broker = brokers(), brokers()
    worker_broker.declare_queue(queue)
    consumer = worker_broker.consume(queue, prefetch=4, timeout=200)

    assert next(consumer) is None  # empty, no listener: waits out its poll
    web_broker.enqueue(_message(queue, 7))
    _take(consumer, 7)


def test_closing_the_broker_ends_a_consumer_waiting_for_a_wake_up(brokers):
    """Shutdown (SIGTERM to `flask worker`) is not held up by a long poll."""
    queue = "runs"
    worker_broker = brokers()
    worker_broker.declare_queue(queue)
    worker_broker.listen_for_wakes(queue)
    consumer = worker_broker.consume(queue, prefetch=4, timeout=LONG_POLL_MS)
    waiting, got = _next_in_thread(consumer)
    waiting.join(0.3)
    assert waiting.is_alive()

    worker_broker.close()
    waiting.join(30)
    assert not waiting.is_alive() and got == [None]
