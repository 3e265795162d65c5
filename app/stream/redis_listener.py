"""The Redis hub's listening (app/stream/redis_hub.py): web processes, for their sockets.

A socket joining mid-run first subscribes (and waits until Redis confirms), then reads the
list and the counter in one transaction: the snapshot is the list replayed through
LiveState, and every message numbered at or below the counter is already in it and is
skipped. Nothing is lost (we were subscribed before reading) and nothing is doubled.

Each process has one pub/sub connection and one listener thread, shared by all its sockets;
each socket keeps its own bounded queue, as with LocalHub. The process SUBSCRIBEs channel by
channel rather than PSUBSCRIBE to everything, so it receives only the conversations its
sockets watch (with a pattern, every web process would parse every token of every run). A
SUBSCRIBE is confirmed by a PING sent after it on the same connection: Redis answers in
order, so its PONG means the subscription is in effect. If the connection drops, the
listener reconnects with backoff and marks every listening subscription overflowed: those
sockets tell their clients to reconnect and catch up from rows."""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.client import PubSub
from redis.retry import Retry

from app.stream.hub import forget
from app.stream.live import LiveState
from app.stream.redis_names import RedisNames
from app.stream.redis_subscription import RedisSubscription, parse_event
from app.telemetry import tracing

log = logging.getLogger(__name__)

# How long subscribe() waits for Redis to confirm the subscription.
SUBSCRIBE_TIMEOUT = 10.0
# How often the listener looks up from its socket (to notice close() or a broken send).
LISTEN_POLL_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 10.0
# A pub/sub connection whose peer vanished without closing it is noticed within a minute.
_KEEPALIVE_OPTIONS = (
    {socket.TCP_KEEPIDLE: 30, socket.TCP_KEEPINTVL: 10, socket.TCP_KEEPCNT: 3}
    if hasattr(socket, "TCP_KEEPIDLE")
    else {}
)


class RedisListener:
    """The process's pub/sub connection and its listener thread (started by the first
    subscribe), which hands each message to the subscriptions of its channel. `read_live`
    reads a conversation's live state and the counter it is current up to."""

    def __init__(
        self,
        url: str,
        names: RedisNames,
        read_live: Callable[[int], tuple[LiveState, int]],
    ) -> None:
        self.names = names
        self._read_live = read_live
        # No silent retries, so the listener sees every drop and reports the gap. The name
        # tells it apart in CLIENT LIST.
        self.name = f"loopdesk-hub-{uuid.uuid4().hex[:12]}"
        self._client = redis.Redis.from_url(
            url,
            client_name=self.name,
            socket_connect_timeout=5,
            socket_timeout=10,
            socket_keepalive=True,
            socket_keepalive_options=_KEEPALIVE_OPTIONS,
            retry=Retry(NoBackoff(), 0),
        )
        # Guards the indexes below and every command sent on the pub/sub connection, so a
        # SUBSCRIBE and an UNSUBSCRIBE of one channel reach Redis in the order decided here.
        self._lock = threading.RLock()
        # Channels this process is subscribed to, and the subscriptions (confirmed or not
        # yet) that receive their messages.
        self._receivers: dict[bytes, set[RedisSubscription]] = {}
        # Subscriptions that subscribe() has returned, as in LocalHub.
        self.by_conversation: dict[int, set[RedisSubscription]] = {}
        self.by_user: dict[int, set[RedisSubscription]] = {}
        # PING tokens sent after a SUBSCRIBE: their PONG confirms it (replies come in order).
        self._barriers: dict[bytes, tuple[threading.Event, RedisSubscription]] = {}
        self._pubsub: Any = None
        self._broken = False
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # -- subscribing ----------------------------------------------------------------------

    def subscribe(self, subscription: RedisSubscription) -> None:
        """Returns once Redis delivers the subscription's channels to it, with its snapshot
        read and started."""
        conversation_id, user_id = subscription.conversation_id, subscription.user_id
        subscription.channels = [self.names.conversation_channel(conversation_id)]
        if user_id is not None:
            subscription.channels.append(self.names.user_channel(user_id))
        confirmed = threading.Event()
        token = uuid.uuid4().hex.encode()
        with self._lock:
            if self._stopping.is_set():
                raise RuntimeError("the hub is closed")
            new = [channel for channel in subscription.channels if channel not in self._receivers]
            for channel in subscription.channels:
                self._receivers.setdefault(channel, set()).add(subscription)
            self._barriers[token] = (confirmed, subscription)

            def confirm(pubsub: PubSub) -> None:
                if new:
                    pubsub.subscribe(*new)
                # its PONG comes after the SUBSCRIBE took effect (redis-py types the
                # message as str; bytes are sent as given)
                pubsub.ping(token)  # type: ignore[arg-type]

            # Without a connection yet, the listener subscribes and pings on connecting.
            self._send(confirm)
            self._start_thread()
        try:
            if not confirmed.wait(SUBSCRIBE_TIMEOUT):
                raise redis.ConnectionError("Redis did not confirm the subscription in time")
            snapshot, seq = self._read_live(conversation_id)
        except BaseException:
            with self._lock:
                self._barriers.pop(token, None)
            self.unsubscribe(subscription)
            raise
        subscription.start(snapshot, seq)
        with self._lock:
            if subscription in self._receivers.get(subscription.channels[0], ()):
                self.by_conversation.setdefault(conversation_id, set()).add(subscription)
                if user_id is not None:
                    self.by_user.setdefault(user_id, set()).add(subscription)

    def unsubscribe(self, subscription: RedisSubscription) -> None:
        with self._lock:
            forget(subscription, self.by_conversation, self.by_user)
            dropped = []
            for channel in subscription.channels:
                receivers = self._receivers.get(channel)
                if receivers is None:
                    continue
                receivers.discard(subscription)
                if not receivers:
                    del self._receivers[channel]
                    dropped.append(channel)
            if dropped:
                self._send(lambda pubsub: pubsub.unsubscribe(*dropped))  # type: ignore[no-untyped-call]

    def _send(self, command: Callable[[PubSub], object]) -> None:
        """Run a command on the pub/sub connection (caller holds the lock). A failure is the
        listener's to handle: it reconnects and resubscribes whatever is wanted then."""
        if self._pubsub is None:
            return
        try:
            command(self._pubsub)
        except (redis.RedisError, OSError) as error:
            log.warning("hub: a pub/sub command failed (%s); reconnecting", error)
            self._broken = True

    # -- the listener thread ----------------------------------------------------------------

    def _start_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._listen, name="loopdesk-hub-listener", daemon=True
            )
            self._thread.start()

    def _listen(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                pubsub = self._connect()
                failures = 0
                while not self._stopping.is_set():
                    if self._broken:
                        raise redis.ConnectionError("a command on the pub/sub connection failed")
                    message = pubsub.get_message(timeout=LISTEN_POLL_SECONDS)
                    if message is not None:
                        self._dispatch(message)
            except (redis.RedisError, OSError) as error:
                if self._stopping.is_set():
                    break
                self._connection_lost(error)
                failures += 1
                # Full jitter, so the processes of a fleet do not reconnect in step.
                delay = random.uniform(0, min(MAX_BACKOFF_SECONDS, 0.1 * 2**failures))
                self._stopping.wait(delay)
            except Exception:
                # A bug must not silence every socket of the process: log, start over.
                log.exception("hub: listener failed; reconnecting")
                self._connection_lost(None)
                self._stopping.wait(1.0)
        with self._lock:
            pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            pubsub.close()

    def _connect(self) -> PubSub:
        """A fresh pub/sub connection subscribed to every channel wanted now; pending
        confirmations are asked again on it."""
        pubsub: PubSub = self._client.pubsub()  # type: ignore[no-untyped-call]
        with self._lock:
            try:
                if self._receivers:
                    pubsub.subscribe(*self._receivers)
                for token in self._barriers:
                    pubsub.ping(token)  # type: ignore[arg-type]  # bytes, sent as given
            except BaseException:
                pubsub.close()
                raise
            self._pubsub = pubsub
            self._broken = False
        return pubsub

    def _connection_lost(self, error: Exception | None) -> None:
        with self._lock:
            pubsub, self._pubsub = self._pubsub, None
            self._broken = False
            for receivers in self._receivers.values():
                for subscription in receivers:
                    if subscription.listening:
                        subscription.overflowed = True
        if pubsub is not None:
            with contextlib.suppress(Exception):  # the connection is already gone
                pubsub.close()
        if error is not None:
            log.warning("hub: Redis pub/sub connection lost (%s); reconnecting", error)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "pong":
            with self._lock:
                barrier = self._barriers.pop(message["data"], None)
                if barrier is not None:
                    confirmed, subscription = barrier
                    subscription.listening = True
                    confirmed.set()
            return
        if kind != "message":
            return  # subscribe/unsubscribe confirmations: the PONG barrier covers them
        channel: bytes = message["channel"]
        with self._lock:
            receivers = list(self._receivers.get(channel, ()))
        if not receivers:
            return  # unsubscribed meanwhile
        data: bytes = message["data"]
        seq: int | None = None
        if self.names.is_conversation_channel(channel):
            number, _, data = data.partition(b"|")
            if not number.isdigit():
                log.warning("hub: skipped a message without a sequence number")
                return
            seq = int(number)
        traceparent, data = tracing.split_frame(data)  # the sending run's trace, if traced
        event = parse_event(data)
        if event is None:
            return
        for subscription in receivers:
            subscription.deliver(seq, event)
            if traceparent:
                subscription.links.add(traceparent)

    # -- shutdown -------------------------------------------------------------------------

    def close(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._pubsub is not None and self._pubsub.subscribed:
                self._send(lambda pubsub: pubsub.ping())  # wakes the listener to notice
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=LISTEN_POLL_SECONDS + 2)
        self._client.close()
