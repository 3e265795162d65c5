"""The two readers of the `relay` benchmark, each on ONE asyncio loop for all its streams.

- `RelayClient`: the browser's side of the real server. Per stream a chat
  (`POST /api/chats`), its JSON socket (`/ws/chats/<id>?format=json`, bearer token), then
  `POST /api/chats/<id>/loop`; every stamp in every `textDelta` frame is a token, read until
  the `done` frame.
- `floor_streams`: the same streams read straight from the stamped model by
  `anthropic.AsyncAnthropic` (raw events of `messages.create(stream=True)`): no relay.

A token's latency is its arrival time (`time.time_ns()` here) minus its stamp (the stamped
model's `time.time_ns()` when it wrote the token): one machine, one clock. Failures are
recorded per stream (`Tally.error`), never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anthropic
import httpx2 as httpx
from simple_websocket import AioClient

SETUP_CONCURRENCY = 32  # chats created and sockets opened at once (werkzeug's backlog is 128)
CONNECT_SECONDS = 15.0
HTTP_SECONDS = 30.0


class StreamFailed(Exception):
    """One stream went wrong; the message is the error's kind, as counted in the report."""


@dataclass
class Tally:
    """What one stream's reader saw."""

    latencies_ns: list[int] = field(default_factory=list)
    started_ns: int | None = None  # when the request that starts the stream was sent
    first_arrival_ns: int | None = None
    first_stamp: int | None = None
    last_stamp: int | None = None
    token_frames: int = 0
    other_frames: int = 0
    done: bool = False
    error: str | None = None

    @property
    def tokens(self) -> int:
        return len(self.latencies_ns)

    @property
    def first_token_ns(self) -> int | None:
        """From the request that starts the stream to the first token's arrival."""
        if self.started_ns is None or self.first_arrival_ns is None:
            return None
        return self.first_arrival_ns - self.started_ns

    def record(self, text: str, arrival_ns: int) -> None:
        if self.first_arrival_ns is None:
            self.first_arrival_ns = arrival_ns
        for token in text.split():
            stamp = int(token)
            self.latencies_ns.append(arrival_ns - stamp)
            if self.first_stamp is None:
                self.first_stamp = stamp
            self.last_stamp = stamp


async def guarded(tally: Tally, work: Awaitable[None], deadline: float) -> None:
    """Run one stream's reader until `deadline` (loop time); record why it failed, if it did."""
    try:
        await asyncio.wait_for(work, max(0.0, deadline - asyncio.get_running_loop().time()))
    except TimeoutError:
        tally.error = "timeout: the stream did not end in time"
    except StreamFailed as error:
        tally.error = str(error)
    except Exception as error:  # anything else is counted, not fatal
        tally.error = f"{type(error).__name__}: {error}"[:120]


async def bounded_gather(count: int, make: Callable[[int], Awaitable], limit: int) -> list:
    """`make(i)` for i in range(count), at most `limit` at once, results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(index: int):
        async with gate:
            return await make(index)

    return await asyncio.gather(*(one(i) for i in range(count)))


# --- through the server --------------------------------------------------------------------


@dataclass
class RelayStream:
    chat_id: int | None = None
    socket: AioClient | None = None
    tally: Tally = field(default_factory=Tally)


class RelayClient:
    def __init__(self, base_url: str, token: str, streams: int):
        self.base_url = base_url
        self.ws_url = base_url.replace("http://", "ws://", 1)
        self.headers = {"Authorization": f"Bearer {token}"}
        self.http = httpx.AsyncClient(
            base_url=base_url,
            headers=self.headers,
            timeout=HTTP_SECONDS,
            limits=httpx.Limits(max_connections=min(streams, 64), max_keepalive_connections=64),
        )
        self.streams: list[RelayStream] = []

    async def prepare(self, count: int) -> None:
        """A chat and an open socket per stream; a stream whose setup failed keeps its error."""
        self.streams = [RelayStream() for _ in range(count)]
        await bounded_gather(count, self._prepare_one, SETUP_CONCURRENCY)

    async def _prepare_one(self, index: int) -> None:
        stream = self.streams[index]
        try:
            response = await self.http.post("/api/chats", json={"title": f"relay bench {index}"})
            if response.status_code != 201:
                raise StreamFailed(f"create chat: HTTP {response.status_code}")
            stream.chat_id = response.json()["id"]
            stream.socket = await asyncio.wait_for(
                AioClient.connect(
                    f"{self.ws_url}/ws/chats/{stream.chat_id}?format=json", headers=self.headers
                ),
                CONNECT_SECONDS,
            )
        except StreamFailed as error:
            stream.tally.error = str(error)
        except Exception as error:
            stream.tally.error = f"setup: {type(error).__name__}: {error}"[:120]

    @property
    def ready(self) -> list[RelayStream]:
        return [s for s in self.streams if s.socket is not None and s.tally.error is None]

    async def run(self, deadline: float) -> None:
        """Start every ready stream at once; each reads its socket until `done`."""
        await asyncio.gather(*(guarded(s.tally, self._one(s), deadline) for s in self.ready))

    async def _one(self, stream: RelayStream) -> None:
        # Read while the POST is in flight: the run may stream before its 202 comes back.
        reading = asyncio.create_task(self._read_until_done(stream))
        stream.tally.started_ns = time.time_ns()
        try:
            response = await self.http.post(
                f"/api/chats/{stream.chat_id}/loop", json={"message": "Stream your stamps."}
            )
            if response.status_code != 202:
                raise StreamFailed(f"loop: HTTP {response.status_code}")
            await reading
        finally:
            if not reading.done():
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reading

    async def _read_until_done(self, stream: RelayStream) -> None:
        tally = stream.tally
        while True:
            data = await stream.socket.receive()  # ConnectionClosed when the server closes it
            arrival = time.time_ns()
            frame = json.loads(data)
            kind = frame.get("type")
            if kind == "textDelta":
                tally.token_frames += 1
                tally.record(frame["text"], arrival)
                continue
            tally.other_frames += 1
            if kind == "error":
                raise StreamFailed(f"error frame: {frame.get('code')}")
            if kind == "done":
                tally.done = True
                if frame.get("status") != "completed":
                    raise StreamFailed(f"run {frame.get('status')}")
                return

    async def close(self) -> None:
        for stream in self.streams:
            if stream.socket is not None:
                with contextlib.suppress(Exception):
                    await stream.socket.close()
                if stream.socket.task is not None:
                    stream.socket.task.cancel()
        await self.http.aclose()


async def relay_streams(
    base_url: str,
    token: str,
    count: int,
    stream_seconds: float,
    subscribe_wait: float,
    on_start: Callable[[], None],
    on_end: Callable[[], None],
) -> list[Tally]:
    """Prepare `count` streams, wait for the sockets to subscribe, run them all at once.
    `on_start`/`on_end` bracket the streaming (the CPU readings)."""
    client = RelayClient(base_url, token, count)
    try:
        await client.prepare(count)
        await asyncio.sleep(subscribe_wait)  # the socket subscribes after its handshake
        on_start()
        await client.run(asyncio.get_running_loop().time() + stream_seconds)
        on_end()
        return [stream.tally for stream in client.streams]
    finally:
        await client.close()


# --- the floor: straight from the model ----------------------------------------------------


async def _floor_one(client: anthropic.AsyncAnthropic, tally: Tally) -> None:
    tally.started_ns = time.time_ns()
    stream = await client.messages.create(
        model="bench",
        max_tokens=8192,
        messages=[{"role": "user", "content": "Stream your stamps."}],
        stream=True,
    )
    async with stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                tally.token_frames += 1
                tally.record(event.delta.text, time.time_ns())
            elif event.type == "message_stop":
                tally.done = True


async def floor_streams(
    model_url: str,
    count: int,
    stream_seconds: float,
    on_start: Callable[[], None],
    on_end: Callable[[], None],
) -> list[Tally]:
    client = anthropic.AsyncAnthropic(
        base_url=model_url, api_key="bench", max_retries=0, timeout=HTTP_SECONDS
    )
    tallies = [Tally() for _ in range(count)]
    try:
        deadline = asyncio.get_running_loop().time() + stream_seconds
        on_start()
        await asyncio.gather(*(guarded(t, _floor_one(client, t), deadline) for t in tallies))
        on_end()
    finally:
        await client.close()
    for tally in tallies:
        if tally.error is None and not tally.done:
            tally.error = "stream ended without message_stop"
    return tallies
