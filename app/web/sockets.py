"""The chat socket: /ws/chats/<id> (HTML fragments for htmx) and ?format=json."""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager
from urllib.parse import urlsplit

from flask import Blueprint, abort, current_app, request
from flask_login import current_user

from app.chat.branches import branch_version, current_leaf, shown_rows
from app.chat.conversations import conversation_dict
from app.chat.models import Conversation
from app.db import read_transaction
from app.events import BranchChanged, RowPersisted, RunError
from app.web.extensions import sock
from app.web.frames import HtmlFrames, JsonFrames
from app.web.identity import db_session
from app.web.input_gate import InputRefused, load_json, max_id

bp = Blueprint("sockets", __name__)

HELLO_SECONDS = 2.0
POLICY_VIOLATION = 1008
TRY_AGAIN_LATER = 1013
WAIT_SECONDS = 1.0


@bp.before_app_request
def check_socket_origin():
    """flask-sock does no Origin check: refuse a cross-site page before the upgrade."""
    if not request.path.startswith("/ws/"):
        return
    origin = request.headers.get("Origin")
    if origin is None:
        return  # not a browser (scripts authenticate with a token)
    if not same_origin(origin, expected_origin()):
        abort(403)


def expected_origin() -> str:
    """PUBLIC_URL when set; else the origin this request was made to (scheme and host as
    the trusted proxies saw them, with TRUSTED_PROXIES)."""
    public_url = current_app.config["LOOPDESK"].public_url
    return public_url or f"{request.scheme}://{request.host}"


def origin_triple(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, effective port) of an http(s) URL; None when it is not one."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def same_origin(origin: str, expected: str) -> bool:
    """The whole origin: scheme, host and port (80/443 when absent) all match."""
    theirs = origin_triple(origin)
    return theirs is not None and theirs == origin_triple(expected)


def _owned_conversation(conversation_id: int) -> bool:
    if not current_user.is_authenticated:
        return False
    with read_transaction(db_session()) as session:
        conversation = session.get(Conversation, conversation_id)
    db_session().close()  # a socket lives long: it holds no session
    return conversation is not None and conversation.user_id == current_user.id


# Sockets open per person in this process: {(app's services, user id): count}.
_open_sockets: dict[tuple[int, int], int] = {}
_open_lock = threading.Lock()


@contextmanager
def _socket_slot(services, user_id: int, limit: int):
    """Whether this person may hold one more socket (MAX_SOCKETS_PER_PERSON); the slot is
    theirs until the block ends."""
    key = (id(services), user_id)
    with _open_lock:
        taken = _open_sockets.get(key, 0) < limit
        if taken:
            _open_sockets[key] = _open_sockets.get(key, 0) + 1
    try:
        yield taken
    finally:
        if taken:
            with _open_lock:
                _open_sockets[key] -= 1
                if not _open_sockets[key]:
                    del _open_sockets[key]


@sock.route("/ws/chats/<int:conversation_id>", bp=bp)
def chat_socket(ws, conversation_id: int):
    """The chat's websocket: rows, live text and run frames, as HTML or JSON (docs/CONTRACT.md)."""
    if not _owned_conversation(conversation_id):
        _refuse(ws, POLICY_VIOLATION, "")
        return
    services = current_app.extensions["services"]
    limit = services.settings.max_sockets_per_person
    with _socket_slot(services, current_user.id, limit) as allowed:
        if not allowed:
            _refuse(ws, TRY_AGAIN_LATER, f"Too many open sockets: at most {limit} per person.")
            return
        _serve(ws, services, conversation_id)


def _refuse(ws, reason: int, message: str) -> None:
    """Close a socket refused at once. The websocket's reader starts in its own thread and
    registers the connection with its selector; returning before it has run would close the
    connection under it (EBADF in that thread). It sees the close and ends at once."""
    ws.close(reason=reason, message=message)
    ws.thread.join(timeout=1)


def _serve(ws, services, conversation_id: int) -> None:
    subscription = services.hub.subscribe(conversation_id, current_user.id)
    frames_class = JsonFrames if request.args.get("format") == "json" else HtmlFrames
    frames = frames_class(conversation_id, subscription.snapshot)
    catch_ups = CatchUpBudget(services.settings)
    try:
        for frame in frames.opening():
            ws.send(frame)
        if isinstance(frames, HtmlFrames):
            # The page says which rows it holds as soon as it connects.
            hello = ws.receive(timeout=HELLO_SECONDS)
            if hello is not None:
                _answer(ws, conversation_id, frames, hello, catch_ups)
        _relay(ws, subscription, frames, conversation_id, catch_ups)
    finally:
        subscription.close()


class CatchUpBudget:
    """Catch-up requests one socket may make: SOCKET_CATCH_UPS_PER_MINUTE in any minute,
    each answering at most SOCKET_CATCH_UP_ROWS rows."""

    def __init__(self, settings, clock=time.monotonic):
        self.per_minute = settings.socket_catch_ups_per_minute
        self.rows = settings.socket_catch_up_rows
        self.clock = clock
        self.recent: deque[float] = deque()

    def spend(self) -> bool:
        now = self.clock()
        while self.recent and now - self.recent[0] >= 60:
            self.recent.popleft()
        if len(self.recent) >= self.per_minute:
            return False
        self.recent.append(now)
        return True


def _answer(ws, conversation_id: int, frames, message, catch_ups: CatchUpBudget) -> None:
    """One message from the client: a catch-up request, or an error frame saying why it
    is not one. Valid JSON objects without "after" are ignored (room for more kinds)."""
    try:
        hello = _hello(message)
    except InputRefused as refused:
        _send_error(ws, frames, "INVALID_INPUT", str(refused))
        return
    if hello is None:
        return
    if not catch_ups.spend():
        _send_error(
            ws,
            frames,
            "RATE_LIMITED",
            f"Too many catch-up requests: at most {catch_ups.per_minute} a minute.",
        )
        return
    _catch_up(ws, conversation_id, frames, hello, catch_ups.rows)


def _send_error(ws, frames, code: str, message: str) -> None:
    for frame in frames.render([RunError(code, message)]):
        ws.send(frame)


def _catch_up(ws, conversation_id: int, frames, hello, page_rows: int) -> None:
    """Send the rows after the sequence the client holds (`{"after": N}`), at most
    `page_rows` of them; when more follow, a `more` frame says to ask again. We
    subscribed before reading them, so a row persisted meanwhile arrives at least once.
    A client that names the branch it shows (`"branch"`, see docs/CONTRACT.md) and missed
    a switch gets the whole shown branch instead."""
    after, version = hello
    more = None
    with (
        current_app.extensions["services"].database.session() as session,
        read_transaction(session),
    ):
        conversation = session.get(Conversation, conversation_id)
        if conversation is None:
            return
        if version is not None and version != branch_version(conversation):
            events = [_shown_branch(session, conversation)]
        else:
            rows = shown_rows(session, conversation, after)
            if len(rows) > page_rows:
                rows = rows[:page_rows]
                more = rows[-1]["sequence"]
            events = [RowPersisted(row) for row in rows]
        # Its title as it is now: one given while this socket was not yet (or no longer)
        # open would otherwise never reach the header, the tab and the list.
        shown = conversation_dict(conversation)
    for frame in frames.render(events) if events else []:
        ws.send(frame)
    if more is not None:
        ws.send(frames.more(more))
    ws.send(frames.title(shown))


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


def _shown_branch(session, conversation) -> BranchChanged:
    return BranchChanged(
        leaf=current_leaf(session, conversation),
        version=branch_version(conversation),
        messages=shown_rows(session, conversation),
    )


def _with_branch(conversation_id: int, batch: list) -> list:
    """A branch change is published empty: the socket reads the branch it sends, in the
    order of its events (rows persisted later arrive after it, or are in it already)."""
    if not any(isinstance(event, BranchChanged) for event in batch):
        return batch
    with (
        current_app.extensions["services"].database.session() as session,
        read_transaction(session),
    ):
        conversation = session.get(Conversation, conversation_id)
        shown = _shown_branch(session, conversation) if conversation is not None else None
    return [
        (shown if isinstance(event, BranchChanged) else event)
        for event in batch
        if shown is not None or not isinstance(event, BranchChanged)
    ]


def _relay(ws, subscription, frames, conversation_id: int, catch_ups: CatchUpBudget) -> None:
    last_send = 0.0
    while ws.connected:
        event = subscription.get(timeout=_wait_seconds(frames))
        if event is None:
            if subscription.overflowed:
                # Events were lost (a full queue, or the hub's connection dropped): the
                # client reconnects and catches up from rows and the live state.
                ws.close(reason=TRY_AGAIN_LATER, message="")
                return
            for frame in frames.flush():  # a throttled render of the live text fell due
                ws.send(frame)
            _read_client_messages(ws, conversation_id, frames, catch_ups)
            continue
        wait = frames.min_interval - (time.monotonic() - last_send)
        if wait > 0:
            time.sleep(wait)  # gather what arrives meanwhile into the same frame
        batch = _with_branch(conversation_id, [event, *subscription.drain()])
        for frame in frames.render(batch):
            ws.send(frame)
        last_send = time.monotonic()
        if subscription.overflowed:
            # Too far behind: reconnecting catches up from rows and the live state.
            ws.close(reason=TRY_AGAIN_LATER, message="")
            return


def _wait_seconds(frames) -> float:
    """How long to wait for the next event: at most until a throttled render is due."""
    due = frames.due()
    if due is None:
        return WAIT_SECONDS
    return min(WAIT_SECONDS, max(0.0, due - time.monotonic()))


def _read_client_messages(ws, conversation_id: int, frames, catch_ups: CatchUpBudget) -> None:
    """Clients may send `{"after": N}` at any time to catch up."""
    while ws.connected:
        message = ws.receive(timeout=0)
        if message is None:
            return
        _answer(ws, conversation_id, frames, message, catch_ups)
