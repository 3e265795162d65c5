"""Ownership in one place: what is not yours answers 404, like what does not exist.

A workspace item (it has a `project_id`) is yours to read while you are a member of its
project, to change while your role allows it (403 when it does not); a chat is its
owner's alone, while they are a member of its project (app/accounts/projects.py)."""

from __future__ import annotations

from typing import TypeVar
from urllib.parse import urlsplit

from flask import abort, current_app, g, request
from flask import session as flask_session
from flask_login import current_user

from app.accounts.projects import (
    READ,
    ProjectRefused,
    membership,
    personal_project_id,
    require,
)
from app.chat.models import Conversation, ConversationStatus
from app.chat.preset_models import Preset
from app.chat.presets import visible_preset
from app.chat.stale import announce, reclaim_if_stale
from app.chat.turn_checks import lock_for_turn
from app.db import read_transaction
from app.error_codes import ErrorCode
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.input_gate import id_from_text

T = TypeVar("T")


def owned_or_404(model: type[T], object_id: int, action: str = READ) -> T:
    session = db_session()
    obj = session.get(model, object_id)
    if obj is None:
        abort(404)
    project_id = getattr(obj, "project_id", None)
    if project_id is None or isinstance(obj, Conversation):
        # The person's own (a chat, an attachment, a token...): theirs alone.
        if getattr(obj, "user_id", None) != current_user.id:
            abort(404)
        if project_id is not None and membership(session, current_user.id, project_id) is None:
            abort(404)
        return obj
    require_in_project(project_id, action)
    return obj


# The project the workspace pages show, chosen with the sidebar's switcher (kept in the
# session cookie; checked against membership at every read, so a removed member's
# choice falls back to their personal project).
PAGE_PROJECT_KEY = "project_id"


def page_project_id() -> int:
    cached = g.get("page_project_id")
    if cached is not None:
        return cached
    session = db_session()
    chosen = flask_session.get(PAGE_PROJECT_KEY)
    if not isinstance(chosen, int) or membership(session, current_user.id, chosen) is None:
        chosen = personal_project_id(session, current_user.id)
    g.page_project_id = chosen
    return chosen


def require_in_project(project_id: int | None, action: str = READ) -> str:
    """The caller's role in the project when it allows `action`: 404 for a non-member (as
    for no such project), 403 in the API's error shape for a role that does not allow it."""
    try:
        return require(db_session(), current_user.id, project_id, action)
    except ProjectRefused as refused:
        raise ApiError(refused.status, refused.message, refused.code, field=refused.field) from None


def owned_before_waiting(model: type[T], object_id: int) -> T:
    """`owned_or_404` in a read transaction that ends here: for a request that then waits
    (reads a body, extracts a file) and must hold no database lock meanwhile."""
    with read_transaction(db_session()):
        return owned_or_404(model, object_id)


def owned_conversation(conversation_id: int) -> Conversation:
    """The caller's conversation, with a run whose heartbeat stopped reclaimed first, so
    a reader never sees a reply that will not come (or is refused a new message)."""
    return _reclaimed_if_stale(owned_or_404(Conversation, conversation_id))


def owned_conversation_for_turn(conversation_id: int) -> Conversation:
    """`owned_conversation` for a request that starts a turn: the same read checks
    ownership and takes the turn's locks (`app.chat.turn_checks.lock_for_turn`), so the turn
    does not read the conversation again."""
    locked = lock_for_turn(db_session(), conversation_id, current_user.id)
    if locked is None:
        abort(404)
    return _reclaimed_if_stale(locked.conversation)


def _reclaimed_if_stale(conversation: Conversation) -> Conversation:
    if conversation.status == ConversationStatus.STREAMING:
        services = current_app.extensions["services"]
        session = db_session()
        reclaimed = reclaim_if_stale(session, conversation.id, services.settings.stale_seconds)
        if reclaimed:
            session.commit()
            session.refresh(conversation)
            announce(services.hub, reclaimed)
    return conversation


def is_htmx() -> bool:
    return request.headers.get("HX-Request") == "true"


# The endpoints whose own URL names the chat the page shows: the chat page and its socket
# (each socket watches one chat, and renders within its upgrade request).
_SHOWING_A_CHAT = ("chat.show", "sockets.chat_socket")


def shown_chat_id() -> int | None:
    """The chat the person's page shows, if any: the chat page and its socket name it in
    their URL; an htmx request is sent from the page (HX-Current-URL)."""
    if request.endpoint in _SHOWING_A_CHAT:
        return (request.view_args or {}).get("conversation_id")
    if not is_htmx():
        return None
    path = urlsplit(request.headers.get("HX-Current-URL", "")).path.rstrip("/")
    head, _, last = path.rpartition("/")
    if head.endswith("/chats") and last.isascii() and last.isdigit() and len(last) < 19:
        return int(last)
    return None


def seen_preset_or_404(preset_id: int) -> Preset:
    """A preset the caller may start a chat from: their own or one for everyone (404 in
    the API's error shape for anyone else's, as for none)."""
    preset = visible_preset(db_session(), preset_id, current_user.id)
    if preset is None:
        raise ApiError(404, "No such preset of yours.", ErrorCode.NOT_FOUND, field="preset_id")
    return preset


def requested_preset(given: str | None) -> Preset | None:
    """The preset a new chat starts from, named on a page (`?preset=` on the draft, its
    composer's `preset_id`): one the person sees, else 404; None when none is named."""
    if not given:
        return None
    preset_id = id_from_text(given)
    preset = visible_preset(db_session(), preset_id, current_user.id) if preset_id else None
    if preset is None:
        abort(404)
    return preset


def requested_preset_id(given: str | None) -> int | None:
    preset = requested_preset(given)
    return preset.id if preset else None
