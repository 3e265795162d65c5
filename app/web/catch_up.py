"""A socket's catch-up answers: `{"after": N}` brings the shown branch's rows after N
(docs/CONTRACT.md). Bounded three ways: SOCKET_CATCH_UP_ROWS rows an answer, then a
`more` frame; SOCKET_CATCH_UPS_PER_MINUTE requests a socket; and
SOCKET_CATCH_UP_BYTES_PER_MINUTE bytes of answers a person, across their sockets in the
process (twenty sockets asking for a long chat again and again would otherwise send tens
of megabytes a minute for a few hundred bytes asked). "Nothing changed" (no row after N,
the same branch) reads no rows and renders nothing new: it costs a few hundred bytes."""

from __future__ import annotations

import uuid

from flask import current_app
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter

from app.chat.branches import branch_version, current_leaf, last_sequence, shown_rows
from app.chat.conversations import conversation_dict
from app.chat.models import Conversation
from app.chat.queue import queue_items
from app.chat.runs import composer_state
from app.db import read_transaction
from app.events import BranchChanged, Event, RowPersisted, RunError
from app.telemetry import metrics
from app.web.input_gate import InputRefused, load_json, max_id
from app.web.socket_access import SocketAccess


class AccessGone(Exception):
    """The socket's session or token no longer lets anyone in: it closes (1008), saying
    `message` when it is not the way in's own (the person left the chat's project)."""

    def __init__(self, message: str = ""):
        super().__init__(message)
        self.message = message


class CatchUpBudget:
    """Catch-up requests one socket may make: SOCKET_CATCH_UPS_PER_MINUTE in any minute,
    each answering at most SOCKET_CATCH_UP_ROWS rows."""

    def __init__(self, settings, limiter: CatchUpLimiter):
        self.per_minute = settings.socket_catch_ups_per_minute
        self.rows = settings.socket_catch_up_rows
        self._limit = RateLimitItemPerMinute(self.per_minute)
        self._limiter = limiter.requests
        self._socket = uuid.uuid4().hex

    def spend(self) -> bool:
        return self._limiter.hit(self._limit, "socket", self._socket)


class CatchUpBytes:
    """Bytes of catch-up answers per person in any minute, across their sockets of one app
    in this process. An answer begun within the budget is sent whole (at most a page): it
    uses up what was left, so the next waits for the window to move."""

    def __init__(self, per_minute: int, limiter: CatchUpLimiter):
        self.per_minute = per_minute
        self._limit = RateLimitItemPerMinute(per_minute)
        self._limiter = limiter.bytes

    def allows(self, user_id: int) -> bool:
        return self._limiter.test(self._limit, "person", str(user_id))

    def spend(self, user_id: int, size: int) -> None:
        left = self._limiter.get_window_stats(self._limit, "person", str(user_id)).remaining
        if left > 0:
            self._limiter.hit(self._limit, "person", str(user_id), cost=min(size, left))


class CatchUpLimiter:
    """The app's windows (the `limits` library in memory: one process's sockets). Requests
    are counted in a moving window; bytes in a sliding counter, whose cost is one number
    however many bytes are spent."""

    def __init__(self):
        storage = MemoryStorage()
        self.requests = MovingWindowRateLimiter(storage)
        self.bytes = SlidingWindowCounterRateLimiter(storage)


def _limiter(app) -> CatchUpLimiter:
    """The app's one limiter (kept on the app, so each test app has its own)."""
    limiter = app.extensions.get("catch_up_limiter")
    if limiter is None:
        limiter = app.extensions.setdefault("catch_up_limiter", CatchUpLimiter())
    return limiter


def person_bytes(app) -> CatchUpBytes:
    per_minute = app.extensions["services"].settings.socket_catch_up_bytes_per_minute
    return CatchUpBytes(per_minute, _limiter(app))


class CatchUps:
    """One socket's catch-up answers."""

    def __init__(self, ws, conversation_id: int, frames, access: SocketAccess):
        self.ws = ws
        self.conversation_id = conversation_id
        self.frames = frames
        self.access = access
        self.services = current_app.extensions["services"]
        self.requests = CatchUpBudget(self.services.settings, _limiter(current_app))
        self.bytes = person_bytes(current_app)
        self._title: tuple[dict, str] | None = None  # the last title frame, and what it shows

    def answer(self, message) -> None:
        """One message from the client: a catch-up request, or an error frame saying why
        it is not one. Valid JSON objects without "after" are ignored (room for more
        kinds). Raises AccessGone when the socket's way in ended."""
        try:
            hello = _hello(message)
        except InputRefused as refused:
            self.send_error("INVALID_INPUT", str(refused))
            return
        if hello is None:
            return
        if not self.requests.spend():
            limit = self.requests.per_minute
            metrics.rate_limited("catch_up_requests")
            self.send_error(
                "RATE_LIMITED", f"Too many catch-up requests: at most {limit} a minute."
            )
            return
        if not self.bytes.allows(self.access.user_id):
            limit = self.bytes.per_minute
            metrics.rate_limited("catch_up_bytes")
            self.send_error(
                "RATE_LIMITED", f"Too many catch-up bytes: at most {limit:,} a minute per person."
            )
            return
        sent = 0
        for frame in self._catch_up(*hello):
            self.ws.send(frame)
            sent += len(frame.encode())
        self.bytes.spend(self.access.user_id, sent)

    def send_error(self, code: str, message: str) -> None:
        for frame in self.frames.render([RunError(code, message)]):
            self.ws.send(frame)

    def _catch_up(self, after: int, version: str | None) -> list[str]:
        """The frames answering `{"after": N}`: the rows after the sequence the client
        holds, at most a page of them; when more follow, a `more` frame says to ask again.
        We subscribed before reading them, so a row persisted meanwhile arrives at least
        once. A client that names the branch it shows (`"branch"`) and missed a switch
        gets the whole shown branch instead."""
        more = None
        with self.services.database.session() as session, read_transaction(session):
            if not self.access.still_lets_in(session):
                raise AccessGone
            conversation = session.get(Conversation, self.conversation_id)
            if conversation is None:
                return []
            if version is not None and version != branch_version(conversation):
                events: list[Event] = [shown_branch(session, conversation)]
            elif last_sequence(session, self.conversation_id) <= after:
                events = []  # nothing changed: no rows read, nothing rendered
            else:
                rows = shown_rows(session, conversation, after)
                if len(rows) > self.requests.rows:
                    rows = rows[: self.requests.rows]
                    more = rows[-1]["sequence"]
                events = [RowPersisted(row) for row in rows]
            # Its title as it is now: one given while this socket was not yet (or no
            # longer) open would otherwise never reach the header, the tab and the list.
            shown = conversation_dict(conversation)
            # And the run's state: a run that started, paused or ended while the socket
            # was down (or before the page's socket opened) shows in its composer.
            composer = composer_state(session, self.conversation_id)
            queued = queue_items(session, self.conversation_id)
        frames = self.frames.render(events) if events else []
        if more is not None:
            frames.append(self.frames.more(more))
        frames.append(self._title_frame(shown))
        if self.frames.sends_composer:
            frames.append(self.frames.composer(composer, queued))
        return frames

    def _title_frame(self, shown: dict) -> str:
        """The title frame, rendered again only when the title (or status) changed."""
        if self._title is None or self._title[0] != shown:
            self._title = (shown, self.frames.title(shown))
        return self._title[1]


def _hello(message) -> tuple[int, str | None] | None:
    """`(after, branch)` from a catch-up request; None for a JSON object that is not one.
    Raises InputRefused for what is not a JSON object or holds a bad `after`."""
    if isinstance(message, bytes):
        raise InputRefused("Send text frames of JSON.")
    database = current_app.extensions["services"].database
    data = load_json(message, current_app.config["LOOPDESK"].max_json_depth, where="The message")
    if not isinstance(data, dict):
        raise InputRefused('The message must be a JSON object, e.g. {"after": 0}.')
    if "after" not in data:
        return None
    after, version = data["after"], data.get("branch")
    largest = max_id(database.engine.dialect.name)
    if not isinstance(after, int) or isinstance(after, bool) or not 0 <= after <= largest:
        raise InputRefused(f"'after' must be a whole number from 0 to {largest}.")
    return after, version if isinstance(version, str) else None


def shown_branch(session, conversation) -> BranchChanged:
    return BranchChanged(
        leaf=current_leaf(session, conversation),
        version=branch_version(conversation),
        messages=shown_rows(session, conversation),
    )
