"""The readers of the serving benchmarks, each on ONE asyncio loop for all its streams.

- `relay_streams`: the browser's side of a server (the app, or the minimal relay, which
  speaks the same routes). Per stream a chat (`POST /api/chats`), its socket
  (`/ws/chats/<id>?format=json`, or the htmx page's HTML socket), then
  `POST /api/chats/<id>/loop`; every stamp in every text frame is a token, read until the
  run's end frame.
- `floor_streams`: the same streams read straight from the stamped model by
  `anthropic.AsyncAnthropic` (raw events of `messages.create(stream=True)`): no relay.
- `first_frames` / `model_first_tokens`: one turn after another, from the request to the
  first text, through a server and straight from the model.
- `hold_idle_sockets`: open sockets that then sit idle.

A token's latency is its arrival time (`time.time_ns()` here) minus its stamp (the stamped
model's `time.time_ns()` when it wrote the token): one machine, one clock. Failures are
recorded per stream (`Tally.error`), never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anthropic
import httpx2 as httpx
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect

SETUP_CONCURRENCY = 32  # chats created and sockets opened at once (werkzeug's backlog is 128)
CONNECT_SECONDS = 30.0
HTTP_SECONDS = 60.0
FORMATS = ("json", "htmx")

# The htmx socket's text arrives rendered as Markdown, a few times a second
# (app/web/live_text.py): the whole #live-text (a segment's first render, or the live area
# when a run's first event arrives), or the blocks that became stable appended to
# #live-md-done and the tail re-rendered. Stamps are digits and spaces: the text is the
# HTML without its tags, and a reader records the stamps it had not seen yet.
HTML_LIVE_WHOLE = re.compile(
    r'<div id="live-md-done"[^>]*>(.*?)</div><div id="live-md-tail"[^>]*>(.*?)</div>', re.S
)
HTML_LIVE_DONE = re.compile(r'hx-swap-oob="beforeend:#live-md-done">(.*?)</div>', re.S)
HTML_LIVE_TAIL = re.compile(r'<div id="live-md-tail"[^>]*hx-swap-oob="true">(.*?)</div>', re.S)
HTML_TAG = re.compile(r"<[^>]+>")
# The reply's row: the last stamps (written since the last render) show first there.
HTML_HOST_ROW = re.compile(
    r'class="row row-host".*?<div class="row-body md" hx-disable>(.*?)</div>', re.S
)
# The end of a run on the htmx socket: the composer comes back idle, with a version newer
# than any the socket showed before the turn (an idle composer also answers the hello, and
# a run's end may send it twice: docs/CONTRACT.md).
HTML_COMPOSER = re.compile(r'id="composer"[^>]*data-state="(\w+)" data-version="(\d+)"')
HTML_ERROR = 'class="banner banner-shown"'  # a RunError's banner (an empty one clears it)


def prompt(tokens: int, delay: float | None = None) -> str:
    """The person's message; the stamped model reads its reply's shape from it."""
    shape = f"stamps={tokens}" + (f" delay={delay}" if delay is not None else "")
    return f"Stream your stamps. {shape}"


class StreamFailed(Exception):
    """One stream went wrong; the message is the error's kind, as counted in the report."""


@dataclass
class Tally:
    """What one stream's reader saw."""

    latencies_ns: list[int] = field(default_factory=list)
    started_ns: int | None = None  # when the request that starts the stream was sent
    accepted_ns: int | None = None  # how long that request took to be answered (202)
    first_arrival_ns: int | None = None
    first_stamp: int | None = None
    last_stamp: int | None = None
    token_frames: int = 0
    out_of_order: int = 0  # stamps not after the previous one: delivered twice or out of order
    other_frames: int = 0
    live_done: int = 0  # stamps of the htmx socket's live text in its stable part
    composer_floor: int = 0  # the newest composer version seen before this turn
    composer_seen: int = 0
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
        # (A reply past the renderer's limit ends its row with "[truncated]": not a stamp.)
        stamps = [word for word in text.split() if word.isdigit()]
        if not stamps:
            return
        if self.first_arrival_ns is None:
            self.first_arrival_ns = arrival_ns
        for token in stamps:
            stamp = int(token)
            self.latencies_ns.append(arrival_ns - stamp)
            if self.first_stamp is None:
                self.first_stamp = stamp
            elif self.last_stamp is not None and stamp <= self.last_stamp:
                self.out_of_order += 1
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


# --- frames --------------------------------------------------------------------------------


def read_json_frame(tally: Tally, data: str, arrival: int) -> bool:
    """Record a JSON frame; True at the run's end."""
    frame = json.loads(data)
    kind = frame.get("type")
    if kind == "textDelta":
        tally.token_frames += 1
        tally.record(frame["text"], arrival)
        return False
    tally.other_frames += 1
    if kind == "error":
        raise StreamFailed(f"error frame: {frame.get('code')}")
    if kind == "done":
        tally.done = True
        if frame.get("status") != "completed":
            raise StreamFailed(f"run {frame.get('status')}")
        return True
    return False


def _stamps(html: str) -> list[str]:
    return HTML_TAG.sub(" ", html).split()


def read_html_frame(tally: Tally, data: str, arrival: int) -> bool:
    """Record an htmx frame (HTML fragments swapped by id); True at the run's end. (A
    stamped reply is one text segment, then its row.)"""
    new: list[str] = []
    whole = HTML_LIVE_WHOLE.search(data)
    if whole:
        done = _stamps(whole[1])
        new = (done + _stamps(whole[2]))[tally.tokens :]
        tally.live_done = len(done)
    else:
        added, tail = HTML_LIVE_DONE.search(data), HTML_LIVE_TAIL.search(data)
        if added or tail:
            known = _stamps(added[1] if added else "") + _stamps(tail[1] if tail else "")
            new = known[tally.tokens - tally.live_done :]
            tally.live_done += len(_stamps(added[1])) if added else 0
    row = HTML_HOST_ROW.search(data)
    if row:
        new += _stamps(row[1])[tally.tokens + len(new) :]
    if new:
        tally.token_frames += 1
        tally.record(" ".join(new), arrival)
    else:
        tally.other_frames += 1
    if HTML_ERROR in data:
        raise StreamFailed("error banner")
    for state, version in HTML_COMPOSER.findall(data):
        tally.composer_seen = max(tally.composer_seen, int(version))
        if state == "idle" and int(version) > tally.composer_floor:
            tally.done = True
    return tally.done


READERS = {"json": read_json_frame, "htmx": read_html_frame}


# --- through a server ----------------------------------------------------------------------


@dataclass
class RelayStream:
    token: str
    chat_id: int | None = None
    socket: ClientConnection | None = None
    tally: Tally = field(default_factory=Tally)
    composer_version: int = 0  # the newest composer its htmx socket showed


class RelayClient:
    """Chats and sockets on one server; stream i acts as account i (`tokens[i]`)."""

    def __init__(self, base_url: str, tokens: list[str], fmt: str = "json"):
        self.base_url = base_url
        self.ws_url = base_url.replace("http://", "ws://", 1)
        self.tokens = tokens or ["-"]
        self.fmt = fmt
        self.read_frame = READERS[fmt]
        self.http = httpx.AsyncClient(
            base_url=base_url,
            timeout=HTTP_SECONDS,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
        )
        self.streams: list[RelayStream] = []

    def headers(self, stream: RelayStream) -> dict:
        return {"Authorization": f"Bearer {stream.token}"}

    async def prepare(self, count: int) -> None:
        """A chat and an open socket per stream; a stream whose setup failed keeps its error."""
        self.streams = [RelayStream(self.tokens[i % len(self.tokens)]) for i in range(count)]
        await bounded_gather(count, self._prepare_one, SETUP_CONCURRENCY)

    async def _prepare_one(self, index: int) -> None:
        stream = self.streams[index]
        try:
            response = await self.http.post(
                "/api/chats", json={"title": f"bench {index}"}, headers=self.headers(stream)
            )
            if response.status_code != 201:
                raise StreamFailed(f"create chat: HTTP {response.status_code}")
            stream.chat_id = response.json()["id"]
            await self.connect(stream)
        except StreamFailed as error:
            stream.tally.error = str(error)
        except Exception as error:
            stream.tally.error = f"setup: {type(error).__name__}: {error}"[:120]

    async def connect(self, stream: RelayStream) -> None:
        query = "?format=json" if self.fmt == "json" else ""
        stream.socket = await asyncio.wait_for(
            ws_connect(
                f"{self.ws_url}/ws/chats/{stream.chat_id}{query}",
                additional_headers=self.headers(stream),
                compression=None,
                ping_interval=None,  # the server pings; the client answers
                max_size=None,
            ),
            CONNECT_SECONDS,
        )
        if self.fmt == "htmx":
            # The page names the last row it holds as soon as the socket opens.
            await stream.socket.send(json.dumps({"after": 0}))

    @property
    def ready(self) -> list[RelayStream]:
        return [s for s in self.streams if s.socket is not None and s.tally.error is None]

    async def run(self, deadline: float, message: str) -> None:
        """Start every ready stream at once; each reads its socket until the run ends."""
        await asyncio.gather(
            *(guarded(s.tally, self.turn(s, message, s.tally), deadline) for s in self.ready)
        )

    async def turn(self, stream: RelayStream, message: str, tally: Tally) -> None:
        # Read while the POST is in flight: the run may stream before its 202 comes back.
        tally.composer_floor = tally.composer_seen = stream.composer_version
        reading = asyncio.create_task(self._read_until_done(stream, tally))
        tally.started_ns = time.time_ns()
        try:
            response = await self.http.post(
                f"/api/chats/{stream.chat_id}/loop",
                json={"message": message},
                headers=self.headers(stream),
            )
            if response.status_code != 202:
                raise StreamFailed(f"loop: HTTP {response.status_code}")
            tally.accepted_ns = time.time_ns() - tally.started_ns
            await reading
        finally:
            if not reading.done():
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reading

    async def _read_until_done(self, stream: RelayStream, tally: Tally) -> None:
        while True:
            data = await stream.socket.recv()  # ConnectionClosed when the server closes it
            done = self.read_frame(tally, data, time.time_ns())
            stream.composer_version = max(stream.composer_version, tally.composer_seen)
            if done:
                return

    async def close(self) -> None:
        await close_all(self.streams)
        await self.http.aclose()


async def close_all(streams: list[RelayStream]) -> None:
    """Close every socket at once: a server notices a close only between its own waits
    (about a second), so closing one after another would take that long per socket."""
    sockets = [stream.socket for stream in streams if stream.socket is not None]
    await asyncio.gather(*(socket.close() for socket in sockets), return_exceptions=True)
    for stream in streams:
        stream.socket = None


async def relay_streams(
    base_url: str,
    tokens: list[str],
    fmt: str,
    count: int,
    message: str,
    stream_seconds: float,
    subscribe_wait: float,
    on_start: Callable[[], None],
    on_end: Callable[[], None],
) -> list[Tally]:
    """Prepare `count` streams, wait for the sockets to subscribe, run them all at once.
    `on_start`/`on_end` bracket the streaming (the CPU readings)."""
    client = RelayClient(base_url, tokens, fmt)
    try:
        await client.prepare(count)
        await asyncio.sleep(subscribe_wait)  # the socket subscribes after its handshake
        on_start()
        await client.run(asyncio.get_running_loop().time() + stream_seconds, message)
        on_end()
        return [stream.tally for stream in client.streams]
    finally:
        await client.close()


async def first_frames(
    base_url: str, tokens: list[str], message: str, turns: int, warm_up: int, seconds: float
) -> list[Tally]:
    """`warm_up` + `turns` turns one after another in one chat; the timed turns' tallies
    (`first_token_ns`: from sending the POST to the first text frame)."""
    client = RelayClient(base_url, tokens[:1], "json")
    tallies = []
    try:
        await client.prepare(1)
        stream = client.streams[0]
        if stream.tally.error:
            raise StreamFailed(stream.tally.error)
        await asyncio.sleep(0.2)
        for index in range(warm_up + turns):
            tally = Tally()
            deadline = asyncio.get_running_loop().time() + seconds
            await guarded(tally, client.turn(stream, message, tally), deadline)
            if index >= warm_up:
                tallies.append(tally)
            if tally.error:
                break
    finally:
        await client.close()
    return tallies


# --- idle sockets --------------------------------------------------------------------------


class IdleSockets:
    """Sockets opened to `chats` chats (one account each) that then say nothing."""

    def __init__(self, base_url: str, tokens: list[str]):
        self.client = RelayClient(base_url, tokens, "json")
        self.chats: list[RelayStream] = []
        self.open: list[RelayStream] = []
        self.errors: list[str] = []

    async def create_chats(self, count: int) -> None:
        await self.client.prepare(count)
        self.chats = self.client.ready
        for stream in self.client.streams:
            if stream.tally.error:
                self.errors.append(stream.tally.error)
        await self.close_sockets(self.chats)  # the chats stay; these sockets were setup

    async def open_sockets(self, count: int) -> int:
        """Open `count` more sockets; the number opened."""
        if not self.chats:
            return 0
        fresh = [
            RelayStream(chat.token, chat.chat_id)
            for chat in (self.chats[i % len(self.chats)] for i in range(count))
        ]

        async def one(index: int) -> None:
            try:
                await self.client.connect(fresh[index])
            except Exception as error:
                self.errors.append(f"{type(error).__name__}: {error}"[:120])

        await bounded_gather(count, one, SETUP_CONCURRENCY)
        opened = [stream for stream in fresh if stream.socket is not None]
        self.open += opened
        return len(opened)

    async def close_sockets(self, streams: list[RelayStream] | None = None) -> None:
        streams = self.open if streams is None else streams
        await close_all(streams)
        if streams is self.open:
            self.open = []

    async def aclose(self) -> None:
        await self.close_sockets()
        await self.client.http.aclose()


# --- the floor: straight from the model ----------------------------------------------------


def model_client(model_url: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=model_url, api_key="bench", max_retries=0, timeout=HTTP_SECONDS
    )


async def _floor_one(client: anthropic.AsyncAnthropic, tally: Tally, message: str) -> None:
    tally.started_ns = time.time_ns()
    stream = await client.messages.create(
        model="bench",
        max_tokens=8192,
        messages=[{"role": "user", "content": message}],
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
    message: str,
    stream_seconds: float,
    on_start: Callable[[], None],
    on_end: Callable[[], None],
) -> list[Tally]:
    client = model_client(model_url)
    tallies = [Tally() for _ in range(count)]
    try:
        deadline = asyncio.get_running_loop().time() + stream_seconds
        on_start()
        await asyncio.gather(
            *(guarded(t, _floor_one(client, t, message), deadline) for t in tallies)
        )
        on_end()
    finally:
        await client.close()
    for tally in tallies:
        if tally.error is None and not tally.done:
            tally.error = "stream ended without message_stop"
    return tallies


async def model_first_tokens(
    model_url: str, message: str, turns: int, warm_up: int, seconds: float
) -> list[Tally]:
    """The model's own time to first token: the same turns, one after another, read
    straight from it."""
    client = model_client(model_url)
    tallies = []
    try:
        for index in range(warm_up + turns):
            tally = Tally()
            deadline = asyncio.get_running_loop().time() + seconds
            await guarded(tally, _floor_one(client, tally, message), deadline)
            if index >= warm_up:
                tallies.append(tally)
    finally:
        await client.close()
    return tallies
