"""The event hub over Redis pub/sub (REDIS_URL set): a run executing in any process streams
to sockets in every web process.

Two halves, each with its own connections and lock: publishing
(app/stream/redis_publisher.py: the numbered events, the live state kept beside them) and
listening (app/stream/redis_listener.py: the process's one pub/sub connection and listener
thread, which feeds its sockets). A worker process only publishes; its listener never
connects."""

from __future__ import annotations

from app import events as ev
from app.stream.hub import Subscription
from app.stream.live import LiveState
from app.stream.redis_listener import RedisListener
from app.stream.redis_names import DEFAULT_PREFIX, RedisNames
from app.stream.redis_publisher import RedisPublisher
from app.stream.redis_subscription import RedisSubscription


def live_ttl_seconds(stale_seconds: float) -> int:
    """A run's live state outlives any healthy pause (heartbeats refresh it) and is gone
    soon after the staleness sweep would have ended a dead run."""
    return int(max(2 * stale_seconds, 60))


class RedisHub:
    """The Hub protocol over Redis. `prefix` namespaces every key and channel (tests give
    each test its own)."""

    def __init__(self, url: str, prefix: str = DEFAULT_PREFIX, live_ttl: int = 180) -> None:
        names = RedisNames(prefix)
        self.publisher = RedisPublisher(url, names, live_ttl)
        self.listener = RedisListener(url, names, self.publisher.read_live)

    def publish(self, conversation_id: int, event: ev.Event) -> None:
        self.publisher.publish(conversation_id, event)

    def publish_user(self, user_id: int, event: ev.Event) -> None:
        self.publisher.publish_user(user_id, event)

    def live_state(self, conversation_id: int) -> LiveState:
        return self.publisher.live_state(conversation_id)

    def subscribe(self, conversation_id: int, user_id: int | None = None) -> Subscription:
        subscription = RedisSubscription(self, conversation_id, user_id)
        self.listener.subscribe(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        assert isinstance(subscription, RedisSubscription)
        self.listener.unsubscribe(subscription)

    def close(self) -> None:
        self.listener.close()
        self.publisher.close()

    # What tests read of a hub, as of LocalHub: the subscriptions subscribe() has returned.

    @property
    def _by_conversation(self) -> dict[int, set[RedisSubscription]]:
        return self.listener.by_conversation

    @property
    def _by_user(self) -> dict[int, set[RedisSubscription]]:
        return self.listener.by_user

    @property
    def listener_name(self) -> str:
        """The pub/sub connection's name in CLIENT LIST."""
        return self.listener.name
