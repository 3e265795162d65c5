"""The chat socket: /ws/chats/<id> (HTML fragments for htmx) and ?format=json."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

from flask import Blueprint, abort, current_app, request
from flask_login import current_user

from app.chat.models import Conversation
from app.extensions import sock
from app.web.frames import HtmlFrames, JsonFrames
from app.web.identity import db_session

bp = Blueprint("sockets", __name__)

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
    if not same_origin(origin, request.host):
        abort(403)


def same_origin(origin: str, host: str) -> bool:
    """Origin names our host (and our port, whenever the Host header carries one)."""
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    if parts.hostname != name.lower().strip("[]"):
        return False
    return not port or str(parts.port or (443 if parts.scheme == "https" else 80)) == port


def _owned_conversation(conversation_id: int) -> bool:
    if not current_user.is_authenticated:
        return False
    conversation = db_session().get(Conversation, conversation_id)
    owned = conversation is not None and conversation.user_id == current_user.id
    db_session().close()  # a socket lives long: never hold a transaction open
    return owned


@sock.route("/ws/chats/<int:conversation_id>", bp=bp)
def chat_socket(ws, conversation_id: int):
    if not _owned_conversation(conversation_id):
        ws.close(reason=POLICY_VIOLATION, message="")
        return
    services = current_app.extensions["services"]
    subscription = services.hub.subscribe(conversation_id, current_user.id)
    frames_class = JsonFrames if request.args.get("format") == "json" else HtmlFrames
    frames = frames_class(conversation_id, subscription.snapshot)
    try:
        for frame in frames.opening():
            ws.send(frame)
        _relay(ws, subscription, frames)
    finally:
        subscription.close()


def _relay(ws, subscription, frames) -> None:
    last_send = 0.0
    while ws.connected:
        event = subscription.get(timeout=WAIT_SECONDS)
        if event is None:
            _discard_client_messages(ws)
            continue
        wait = frames.min_interval - (time.monotonic() - last_send)
        if wait > 0:
            time.sleep(wait)  # gather what arrives meanwhile into the same frame
        batch = [event, *subscription.drain()]
        for frame in frames.render(batch):
            ws.send(frame)
        last_send = time.monotonic()
        if subscription.overflowed:
            # Too far behind: reconnecting catches up from rows and the live state.
            ws.close(reason=TRY_AGAIN_LATER, message="")
            return


def _discard_client_messages(ws) -> None:
    while ws.connected and ws.receive(timeout=0) is not None:
        pass
