"""The event hub over Redis pub/sub (REDIS_URL set): a run executing in any process streams
to sockets in every web process.

Per conversation, Redis holds three keys that expire together (refreshed on every publish):
- `seq`: a counter numbering every event published on the conversation's channel;
- `live`: the events of the active run (what LiveState is built from), cleared by its Done;
- `run`: the id of the run the `live` list belongs to.
One Lua script per event numbers it, updates the live list and PUBLISHes `seq|event` on the
conversation's channel: one round trip, and atomic, so the counter orders the list and the
channel alike.

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
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.client import PubSub
from redis.retry import Retry

from app import events as ev
from app.stream.hub import Subscription, forget
from app.stream.live import LiveEffect, LiveState, live_effect
from app.stream.redis_subscription import RedisSubscription, parse_event

log = logging.getLogger(__name__)

# The publish script's keys and arguments for one event.
ScriptCall = tuple[list[str], list[bytes | str | int]]

DEFAULT_PREFIX = "loopdesk:"
# How long subscribe() waits for Redis to confirm the subscription.
SUBSCRIBE_TIMEOUT = 10.0
# How often the listener looks up from its socket (to notice close() or a broken send).
LISTEN_POLL_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 10.0
# After a failed publish, later ones are dropped for this long instead of each waiting on
# a dead connection: the run goes on (rows are the truth) and sockets catch up from rows.
PUBLISH_PAUSE_SECONDS = 1.0
PUBLISH_CONNECTIONS = 32
# A pub/sub connection whose peer vanished without closing it is noticed within a minute.
_KEEPALIVE_OPTIONS = (
    {socket.TCP_KEEPIDLE: 30, socket.TCP_KEEPINTVL: 10, socket.TCP_KEEPCNT: 3}
    if hasattr(socket, "TCP_KEEPIDLE")
    else {}
)

# KEYS: seq, live, run. ARGV: channel, payload, mode, run_id, ttl, live_payload.
# mode: the event's LiveEffect (app/stream/live.py), which the script applies to the list:
# "pass" leaves it, "run" appends (a new run id first starts a new list), "row" appends only
# if its run is the live one, "done" clears it if its run is the live one.
# An absent counter starts at the server clock in microseconds, so it keeps growing across
# expiries and a long-lived subscriber never mistakes new events for ones it already has.
PUBLISH_SCRIPT = """
local seq_key, live_key, run_key = KEYS[1], KEYS[2], KEYS[3]
local channel, payload, mode, run_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, live_payload = ARGV[5], ARGV[6]
if redis.call('EXISTS', seq_key) == 0 then
  local now = redis.call('TIME')
  redis.call('SET', seq_key, now[1] .. string.format('%06d', tonumber(now[2])))
end
local seq = redis.call('INCR', seq_key)
redis.call('EXPIRE', seq_key, ttl)
if mode ~= 'pass' then
  local current = redis.call('GET', run_key)
  if mode == 'done' then
    if current == run_id then
      redis.call('DEL', live_key, run_key)
    end
  elseif mode == 'run' or current == run_id then
    if current ~= run_id then
      redis.call('DEL', live_key)
    end
    redis.call('SET', run_key, run_id, 'EX', ttl)
    redis.call('RPUSH', live_key, live_payload)
    redis.call('EXPIRE', live_key, ttl)
  end
end
redis.call('PUBLISH', channel, string.format('%d', seq) .. '|' .. payload)
return seq
"""


def live_ttl_seconds(stale_seconds: float) -> int:
    """A run's live state outlives any healthy pause (heartbeats refresh it) and is gone
    soon after the staleness sweep would have ended a dead run."""
    return int(max(2 * stale_seconds, 60))


def _dumps(event: ev.Event) -> str:
    return ev.wire_text(event, compact=True)


def _live_payload(event: ev.Event, effect: LiveEffect) -> str | None:
    """What to keep in the live list for the event, when not the event itself."""
    if effect is LiveEffect.ROW and isinstance(event, ev.RowPersisted):
        # LiveState reads only a row's kind: keep that, not the whole (large) row.
        return _dumps(ev.RowPersisted({"kind": event.row.get("kind")}, event.run_id))
    return None


class RedisHub:
    """The Hub protocol over Redis. `prefix` namespaces every key and channel (tests give
    each test its own)."""

    def __init__(self, url: str, prefix: str = DEFAULT_PREFIX, live_ttl: int = 180) -> None:
        self.prefix = prefix
        self.live_ttl = max(1, int(live_ttl))
        # Publishing: a pooled, thread-safe client. One retry, on connection errors only (a
        # dead pooled socket); a timed-out script may have run, and running it twice would
        # double the text.
        # Runs publish from many threads (or greenlets): they wait for a pooled connection
        # rather than fail when all are busy (redis-py's plain pool raises at 100).
        self._redis = redis.Redis(
            connection_pool=redis.BlockingConnectionPool.from_url(
                url,
                max_connections=PUBLISH_CONNECTIONS,
                timeout=5,
                socket_connect_timeout=2,
                socket_timeout=5,
            ),
            retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
        )
        self._publish_script = self._redis.register_script(PUBLISH_SCRIPT)
        self._outbox: deque[tuple[int, ev.Event]] = deque()
        self._sending = threading.Lock()
        self._publish_paused_until = 0.0
        # Listening: no silent retries, so the listener sees every drop and reports the gap.
        # The name tells it apart in CLIENT LIST.
        self.listener_name = f"loopdesk-hub-{uuid.uuid4().hex[:12]}"
        self._listen_client = redis.Redis.from_url(
            url,
            client_name=self.listener_name,
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
        self._by_conversation: dict[int, set[RedisSubscription]] = {}
        self._by_user: dict[int, set[RedisSubscription]] = {}
        # PING tokens sent after a SUBSCRIBE: their PONG confirms it (replies come in order).
        self._barriers: dict[bytes, tuple[threading.Event, RedisSubscription]] = {}
        self._pubsub: Any = None
        self._broken = False
        self._listener: threading.Thread | None = None
        self._stopping = threading.Event()

    # -- names ----------------------------------------------------------------------------

    def _conversation_channel(self, conversation_id: int) -> bytes:
        return f"{self.prefix}conversation:{conversation_id}".encode()

    def _is_conversation_channel(self, channel: bytes) -> bool:
        return channel.startswith(f"{self.prefix}conversation:".encode())

    def _user_channel(self, user_id: int) -> bytes:
        return f"{self.prefix}user:{user_id}".encode()

    def _live_keys(self, conversation_id: int) -> list[str]:
        # The braces are a cluster hash tag: the script's three keys share a slot.
        base = f"{self.prefix}live:{{{conversation_id}}}:"
        return [base + "seq", base + "events", base + "run"]

    # -- publishing (any process; needs no subscriber) --------------------------------------

    def publish(self, conversation_id: int, event: ev.Event) -> None:
        """Send at once when no one else is sending; otherwise leave the event for the
        sender in flight, which drains everything waiting into one pipelined round trip
        (neighbouring text deltas of a run merged). Idle, an event costs one round trip;
        busy (a worker streaming a hundred runs), many events share one."""
        if time.monotonic() < self._publish_paused_until:
            return
        self._outbox.append((conversation_id, event))
        while self._outbox and self._sending.acquire(blocking=False):
            try:
                while self._outbox:
                    self._send_batch(_drain(self._outbox))
            finally:
                self._sending.release()
            # An event left just after our last look is sent by the loop's next turn.

    def _send_batch(self, batch: list[tuple[int, ev.Event]]) -> None:
        try:
            if len(batch) == 1:
                keys, args = self._script_call(*batch[0])
                self._publish_script(keys=keys, args=args)  # loads the script if Redis lost it
                return
            self._send_pipelined(
                [self._script_call(*item) for item in ev.coalesce_per_conversation(batch)]
            )
        except redis.RedisError as error:
            self._publish_failed(error)

    def _send_pipelined(self, calls: list[ScriptCall]) -> None:
        """The script by its hash, in one pipelined round trip. (Passing the Script object
        would make redis-py ask SCRIPT EXISTS first on every batch: a second round trip.)
        Calls refused because Redis lost the script (a restart) are sent again once it is
        loaded; only those, so no event is published twice."""
        sha = self._publish_script.sha
        for attempt in range(2):
            with self._redis.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    pipe.evalsha(sha, len(keys), *keys, *args)
                replies = pipe.execute(raise_on_error=False)
            refused = [c for c, r in zip(calls, replies, strict=True) if _no_script(r)]
            failed = [r for r in replies if isinstance(r, Exception) and not _no_script(r)]
            if failed:
                raise failed[0]
            if not refused:
                return
            if attempt == 0:
                sha = self._redis.script_load(PUBLISH_SCRIPT)
                calls = refused
        raise redis.exceptions.NoScriptError("Redis refused the publish script")

    def _script_call(self, conversation_id: int, event: ev.Event) -> ScriptCall:
        """The publish script's keys and arguments for one event."""
        payload = _dumps(event)
        effect = live_effect(event)  # decided here; the script only applies it
        live_payload = _live_payload(event, effect)
        run_id = getattr(event, "run_id", None)
        args: list[bytes | str | int] = [
            self._conversation_channel(conversation_id),
            payload,
            effect.value,
            "" if run_id is None else str(run_id),
            self.live_ttl,
            live_payload or payload,
        ]
        return self._live_keys(conversation_id), args

    def publish_user(self, user_id: int, event: ev.Event) -> None:
        if time.monotonic() < self._publish_paused_until:
            return
        try:
            self._redis.publish(self._user_channel(user_id), _dumps(event))
        except redis.RedisError as error:
            self._publish_failed(error)

    def _publish_failed(self, error: Exception) -> None:
        self._publish_paused_until = time.monotonic() + PUBLISH_PAUSE_SECONDS
        log.warning(
            "hub: publishing to Redis failed (%s); live events are dropped for %.0f s, "
            "sockets catch up from rows",
            error,
            PUBLISH_PAUSE_SECONDS,
        )

    # -- live state ---------------------------------------------------------------------

    def live_state(self, conversation_id: int) -> LiveState:
        return self._read_live(conversation_id)[0]

    def _read_live(self, conversation_id: int) -> tuple[LiveState, int]:
        """The active run's state and the counter it is current up to, read atomically."""
        seq_key, live_key, run_key = self._live_keys(conversation_id)
        pipe = self._redis.pipeline(transaction=True)
        pipe.get(seq_key)
        pipe.get(run_key)
        pipe.lrange(live_key, 0, -1)
        seq, run_id, items = pipe.execute()
        state = LiveState()
        if run_id is not None:
            state.reset(int(run_id))
            for item in items:
                event = parse_event(item)
                if event is not None:
                    state.apply(event)
        return state, int(seq or 0)

    # -- subscribing (web processes) ----------------------------------------------------

    def subscribe(self, conversation_id: int, user_id: int | None = None) -> Subscription:
        subscription = RedisSubscription(self, conversation_id, user_id)
        subscription.channels = [self._conversation_channel(conversation_id)]
        if user_id is not None:
            subscription.channels.append(self._user_channel(user_id))
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
            self._start_listener()
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
                self._by_conversation.setdefault(conversation_id, set()).add(subscription)
                if user_id is not None:
                    self._by_user.setdefault(user_id, set()).add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        assert isinstance(subscription, RedisSubscription)
        with self._lock:
            forget(subscription, self._by_conversation, self._by_user)
            dropped = []
            for channel in getattr(subscription, "channels", ()):
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

    def _start_listener(self) -> None:
        if self._listener is None or not self._listener.is_alive():
            self._listener = threading.Thread(
                target=self._listen, name="loopdesk-hub-listener", daemon=True
            )
            self._listener.start()

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
        pubsub: PubSub = self._listen_client.pubsub()  # type: ignore[no-untyped-call]
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
        if self._is_conversation_channel(channel):
            number, _, data = data.partition(b"|")
            if not number.isdigit():
                log.warning("hub: skipped a message without a sequence number")
                return
            seq = int(number)
        event = parse_event(data)
        if event is None:
            return
        for subscription in receivers:
            subscription.deliver(seq, event)

    # -- shutdown -------------------------------------------------------------------------

    def close(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._pubsub is not None and self._pubsub.subscribed:
                self._send(lambda pubsub: pubsub.ping())  # wakes the listener to notice
        listener = self._listener
        if listener is not None and listener is not threading.current_thread():
            listener.join(timeout=LISTEN_POLL_SECONDS + 2)
        self._redis.close()
        self._listen_client.close()


def _no_script(reply: Any) -> bool:
    return isinstance(reply, redis.exceptions.NoScriptError)


def _drain(outbox: deque[tuple[int, ev.Event]]) -> list[tuple[int, ev.Event]]:
    batch = []
    with contextlib.suppress(IndexError):
        while True:
            batch.append(outbox.popleft())
    return batch
