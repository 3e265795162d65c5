"""The names the Redis hub gives its channels and keys, which its publishing
(app/stream/redis_publisher.py) and its listening (app/stream/redis_listener.py) share."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PREFIX = "loopdesk:"


@dataclass(frozen=True)
class RedisNames:
    """`prefix` namespaces every key and channel (tests give each test its own)."""

    prefix: str = DEFAULT_PREFIX

    def conversation_channel(self, conversation_id: int) -> bytes:
        return f"{self.prefix}conversation:{conversation_id}".encode()

    def is_conversation_channel(self, channel: bytes) -> bool:
        return channel.startswith(f"{self.prefix}conversation:".encode())

    def user_channel(self, user_id: int) -> bytes:
        return f"{self.prefix}user:{user_id}".encode()

    def live_keys(self, conversation_id: int) -> list[str]:
        """The conversation's `seq`, `live` and `run` keys (app/stream/redis_publisher.py)."""
        # The braces are a cluster hash tag: the script's three keys share a slot.
        base = f"{self.prefix}live:{{{conversation_id}}}:"
        return [base + "seq", base + "events", base + "run"]
