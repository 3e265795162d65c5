"""The Redis hub's publishing (app/stream/redis_hub.py): any process, and needs no
subscriber.

Per conversation, Redis holds three keys that expire together (refreshed on every publish):
- `seq`: a counter numbering every event published on the conversation's channel;
- `live`: the events of the active run (what LiveState is built from), cleared by its Done;
- `run`: the id of the run the `live` list belongs to.
One Lua script per event numbers it, updates the live list and PUBLISHes `seq|event` on the
conversation's channel: one round trip, and atomic, so the counter orders the list and the
channel alike."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from app import events as ev
from app.stream.live import LiveEffect, LiveState, live_effect
from app.stream.redis_names import RedisNames
from app.stream.redis_subscription import parse_event
from app.telemetry import tracing

log = logging.getLogger(__name__)

# The publish script's keys and arguments for one event.
ScriptCall = tuple[list[str], list[bytes | str | int]]

# After a failed publish, later ones are dropped for this long instead of each waiting on
# a dead connection: the run goes on (rows are the truth) and sockets catch up from rows.
PUBLISH_PAUSE_SECONDS = 1.0
PUBLISH_CONNECTIONS = 32
# Tracing on: the most runs whose trace context is kept for their frames.
MAX_TRACED_RUNS = 10_000

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


def _dumps(event: ev.Event) -> str:
    return ev.wire_text(event, compact=True)


def _live_payload(event: ev.Event, effect: LiveEffect) -> str | None:
    """What to keep in the live list for the event, when not the event itself."""
    if effect is LiveEffect.ROW and isinstance(event, ev.RowPersisted):
        # LiveState reads only a row's kind: keep that, not the whole (large) row.
        return _dumps(ev.RowPersisted({"kind": event.row.get("kind")}, event.run_id))
    return None


class RedisPublisher:
    """Publishes a conversation's events (numbered, and kept in its live state) and a
    person's, and reads the live state back."""

    def __init__(self, url: str, names: RedisNames, live_ttl: int) -> None:
        self.names = names
        self.live_ttl = max(1, int(live_ttl))
        # A pooled, thread-safe client. One retry, on connection errors only (a dead pooled
        # socket); a timed-out script may have run, and running it twice would double the
        # text.
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
        # Tracing on: each run's trace context, sent with its frames (app/telemetry).
        self._run_traces: dict[int, str] = {}

    def publish(self, conversation_id: int, event: ev.Event) -> None:
        """Send at once when no one else is sending; otherwise leave the event for the
        sender in flight, which drains everything waiting into one pipelined round trip
        (neighbouring text deltas of a run merged). Idle, an event costs one round trip;
        busy (a worker streaming a hundred runs), many events share one."""
        if time.monotonic() < self._publish_paused_until:
            return
        if tracing.enabled():
            self._note_trace(event)
        self._outbox.append((conversation_id, event))
        while self._outbox and self._sending.acquire(blocking=False):
            try:
                while self._outbox:
                    self._send_batch(_drain(self._outbox))
            finally:
                self._sending.release()
            # An event left just after our last look is sent by the loop's next turn.

    def _note_trace(self, event: ev.Event) -> None:
        """The trace the run publishing `event` is in (read here, in the run's thread: the
        batch may be sent by another run's)."""
        run_id = getattr(event, "run_id", None)
        if run_id is not None:
            if len(self._run_traces) > MAX_TRACED_RUNS:
                self._run_traces.clear()  # runs whose Done was never published
            self._run_traces[run_id] = tracing.frame_trace()

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
        traced = self._run_traces.get(run_id) if run_id is not None else None
        if isinstance(event, ev.Done):
            self._run_traces.pop(event.run_id, None)
        args: list[bytes | str | int] = [
            self.names.conversation_channel(conversation_id),
            tracing.traced_frame(traced, payload),
            effect.value,
            "" if run_id is None else str(run_id),
            self.live_ttl,
            live_payload or payload,
        ]
        return self.names.live_keys(conversation_id), args

    def publish_user(self, user_id: int, event: ev.Event) -> None:
        if time.monotonic() < self._publish_paused_until:
            return
        try:
            self._redis.publish(self.names.user_channel(user_id), _dumps(event))
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
        return self.read_live(conversation_id)[0]

    def read_live(self, conversation_id: int) -> tuple[LiveState, int]:
        """The active run's state and the counter it is current up to, read atomically."""
        seq_key, live_key, run_key = self.names.live_keys(conversation_id)
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

    def close(self) -> None:
        self._redis.close()


def _no_script(reply: Any) -> bool:
    return isinstance(reply, redis.exceptions.NoScriptError)


def _drain(outbox: deque[tuple[int, ev.Event]]) -> list[tuple[int, ev.Event]]:
    batch = []
    with contextlib.suppress(IndexError):
        while True:
            batch.append(outbox.popleft())
    return batch
