"""The chat socket: /ws/chats/<id> (HTML fragments for htmx) and ?format=json."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from urllib.parse import urlsplit

from flask import Blueprint, abort, current_app, request
from flask_login import current_user

from app import events as ev
from app.accounts.projects import membership
from app.chat.models import Conversation
from app.chat.queue import queue_items
from app.chat.runs import composer_state
from app.db import read_transaction
from app.events import AccessEnded, BranchChanged
from app.telemetry import metrics, tracing
from app.web.catch_up import AccessGone, CatchUps, shown_branch
from app.web.context_gauge import changes_context, gauge_frame
from app.web.extensions import sock
from app.web.frames import HtmlFrames, JsonFrames
from app.web.identity import bearer_token, db_session
from app.web.socket_access import SocketAccess

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


# Why a socket was refused at once (its close reason, code 1008; docs/CONTRACT.md).
NO_CREDENTIALS = "Log in, or send an API token (Authorization: Bearer <token>)."
BAD_TOKEN = "This API token is not valid: it was revoked, it expired, or it is mistyped."
LEFT_PROJECT = "You are no longer a member of this chat's project."
NO_SUCH_CHAT = "No such chat."  # not yours, or absent: never which


def _refusal(conversation_id: int) -> tuple[str, int | None]:
    """The reason this socket may not open ("" when it may), and the chat's project."""
    if not current_user.is_authenticated:
        return BAD_TOKEN if bearer_token() is not None else NO_CREDENTIALS, None
    project_id = _owned_conversation_project(conversation_id)
    return ("" if project_id is not None else NO_SUCH_CHAT), project_id


def _owned_conversation_project(conversation_id: int) -> int | None:
    """The project of the caller's chat, while they are a member of it; else None."""
    with read_transaction(db_session()) as session:
        conversation = session.get(Conversation, conversation_id)
        mine = conversation is not None and conversation.user_id == current_user.id
        project_id = conversation.project_id if conversation is not None and mine else None
        if project_id is not None and membership(session, current_user.id, project_id) is None:
            project_id = None
    db_session().close()  # a socket lives long: it holds no session
    return project_id


# Sockets open per person in this process: {(app's services, user id): their sockets}.
# A socket counts while it is connected: its slot is free the moment it closes (its
# reader sees the close), not once its relay next looks up.
_open_sockets: dict[tuple[int, int], set] = {}
_open_lock = threading.Lock()


@contextmanager
def _socket_slot(ws, services, user_id: int, limit: int):
    """Whether this person may hold one more socket (MAX_SOCKETS_PER_PERSON); the slot is
    theirs until the block ends or the socket closes."""
    key = (id(services), user_id)
    with _open_lock:
        held = _open_sockets.setdefault(key, set())
        taken = sum(1 for other in held if other.connected) < limit
        if taken:
            held.add(ws)
        elif not held:
            del _open_sockets[key]
    if taken:
        metrics.socket_opened()
    else:
        metrics.rate_limited("too_many_sockets")
    try:
        yield taken
    finally:
        if taken:
            metrics.socket_closed()
            with _open_lock:
                held.discard(ws)
                if not held:
                    _open_sockets.pop(key, None)


@sock.route("/ws/chats/<int:conversation_id>", bp=bp)
def chat_socket(ws, conversation_id: int):
    """The chat's websocket: rows, live text and run frames, as HTML or JSON (docs/CONTRACT.md)."""
    tracing.current().set("gen_ai.conversation.id", str(conversation_id))  # its request's span
    refused, project_id = _refusal(conversation_id)
    if refused:
        _refuse(ws, POLICY_VIOLATION, refused)
        return
    services = current_app.extensions["services"]
    limit = services.settings.max_sockets_per_person
    access = SocketAccess.of_request(current_user.id, project_id)
    with _socket_slot(ws, services, current_user.id, limit) as allowed:
        if not allowed:
            _refuse(ws, TRY_AGAIN_LATER, f"Too many open sockets: at most {limit} per person.")
            return
        try:
            _serve(ws, services, conversation_id, access)
        except AccessGone as gone:
            if ws.connected:
                _refuse(ws, POLICY_VIOLATION, gone.message or access.ended_message)


# How long a refused socket waits for the client's answer to its close. Returning sooner
# closes the connection with the client's answer unread, and the reset that follows can
# discard our close frame before the client reads it (it then sees 1005 or 1006, without
# the reason): seen once in CI under load with the 1 s this used to be.
CLOSE_ANSWER_SECONDS = 5.0


def _refuse(ws, reason: int, message: str) -> None:
    """Close a socket refused at once. The websocket's reader starts in its own thread and
    registers the connection with its selector; returning before it has run would close the
    connection under it (EBADF in that thread). It ends once the client answered the close
    (at once, from any client that follows the protocol)."""
    ws.close(reason=reason, message=message)
    ws.thread.join(timeout=CLOSE_ANSWER_SECONDS)


class _Doorbell:
    """Stands in for simple_websocket's `event`, which its reader thread sets whenever a
    message or the close arrives: setting it also wakes the socket's wait on its
    subscription, so a catch-up asked on a quiet chat is answered at once (it waited for
    the next event or WAIT_SECONDS) and a client's close is seen at once."""

    def __init__(self, event, ring) -> None:
        self._event = event
        self._ring = ring

    def set(self) -> None:
        self._event.set()
        self._ring()

    def __getattr__(self, name: str):
        return getattr(self._event, name)


def _ring_on_client_messages(ws, subscription) -> None:
    event = getattr(ws, "event", None)
    if event is not None:  # (simple_websocket's; another server's socket waits as before)
        ws.event = _Doorbell(event, subscription.wake)
        subscription.wake()  # for a message that arrived before the doorbell was in place


def _serve(ws, services, conversation_id: int, access: SocketAccess) -> None:
    subscription = services.hub.subscribe(conversation_id, current_user.id)
    _ring_on_client_messages(ws, subscription)
    try:
        # Read again once subscribed: an end committed before this read is seen here, one
        # after it is published after it, so it reaches the subscription.
        with services.database.session() as session:
            if not access.still_lets_in(session):
                raise AccessGone
        frames_class = JsonFrames if request.args.get("format") == "json" else HtmlFrames
        frames = frames_class(conversation_id, subscription.snapshot)
        catch_ups = CatchUps(ws, conversation_id, frames, access)
        for frame in frames.opening():
            ws.send(frame)
        if isinstance(frames, HtmlFrames):
            # The page says which rows it holds as soon as it connects.
            hello = ws.receive(timeout=HELLO_SECONDS)
            if hello is not None:
                catch_ups.answer(hello)
        _relay(ws, subscription, frames, catch_ups)
    finally:
        subscription.close()


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
        shown = shown_branch(session, conversation) if conversation is not None else None
    return [
        (shown if isinstance(event, BranchChanged) else event)
        for event in batch
        if shown is not None or not isinstance(event, BranchChanged)
    ]


def _relay(ws, subscription, frames, catch_ups: CatchUps) -> None:
    conversation_id, access = catch_ups.conversation_id, catch_ups.access
    last_send = 0.0
    while ws.connected:
        if access.expired():  # a token's expiry, or the session's lifetime
            raise AccessGone
        event = subscription.get(timeout=_wait_seconds(frames))
        if event is None:
            if subscription.overflowed:
                # Events were lost (a full queue, or the hub's connection dropped): the
                # client reconnects and catches up from rows and the live state.
                ws.close(reason=TRY_AGAIN_LATER, message="")
                return
            for frame in frames.flush():  # a throttled render of the live text fell due
                ws.send(frame)
            _read_client_messages(ws, catch_ups)
            continue
        wait = frames.min_interval - (time.monotonic() - last_send)
        if wait > 0:
            time.sleep(wait)  # gather what arrives meanwhile into the same frame
        batch = _with_branch(
            conversation_id, _without_access_ended(access, [event, *subscription.drain()])
        )
        for frame in frames.render(batch):
            ws.send(frame)
        if frames.sends_composer and _changes_run_state(conversation_id, batch):
            ws.send(composer_frame(frames, conversation_id))
        if frames.sends_composer and changes_context(batch):
            gauge = gauge_frame(conversation_id)  # the header's context gauge
            if gauge:
                ws.send(gauge)
        last_send = time.monotonic()
        if subscription.overflowed:
            # Too far behind: reconnecting catches up from rows and the live state.
            ws.close(reason=TRY_AGAIN_LATER, message="")
            return
        # Every turn, not only when the stream is quiet: a client joining mid-run asks
        # for the rows it missed while the run streams.
        _read_client_messages(ws, catch_ups)


def _changes_run_state(conversation_id: int, batch: list) -> bool:
    """Whether the batch may change what the composer shows: a run of this chat started
    or ended (its status is published with every start and end), or another branch is
    shown (a card left there is dismissed), or the chat's queue changed (it shows with
    the composer: app.web.frames.HtmlFrames.composer)."""
    return any(
        isinstance(event, ev.Done | BranchChanged | ev.QueueChanged)
        or (
            isinstance(event, ev.ConversationChanged)
            and event.conversation.get("id") == conversation_id
        )
        for event in batch
    )


def composer_frame(frames, conversation_id: int) -> str:
    """The composer in the run's state as the database has it now (a read that comes
    after the events that changed it, so never older than what they said)."""
    with (
        current_app.extensions["services"].database.session() as session,
        read_transaction(session),
    ):
        state = composer_state(session, conversation_id)
        queued = queue_items(session, conversation_id)
    return frames.composer(state, queued)


def _without_access_ended(access: SocketAccess, batch: list) -> list:
    """The batch without AccessEnded events (never sent to a client); raises AccessGone
    when one ends this socket's way in."""
    if not any(isinstance(event, AccessEnded) for event in batch):
        return batch
    for event in batch:
        if isinstance(event, AccessEnded) and access.ended_by(event):
            raise AccessGone(LEFT_PROJECT if event.project_id is not None else "")
    return [event for event in batch if not isinstance(event, AccessEnded)]


def _wait_seconds(frames) -> float:
    """How long to wait for the next event: at most until a throttled render is due."""
    due = frames.due()
    if due is None:
        return WAIT_SECONDS
    return min(WAIT_SECONDS, max(0.0, due - time.monotonic()))


def _read_client_messages(ws, catch_ups: CatchUps) -> None:
    """Clients may send `{"after": N}` at any time to catch up. Read only what the
    socket's reader has already buffered: asking with nothing there (a receive with timeout
    0) costs a timer and a round trip through gevent's loop, after every frame sent."""
    while ws.connected and ws.input_buffer:
        message = ws.receive(timeout=0)
        if message is None:
            return
        catch_ups.answer(message)
