"""Ownership in one place: what is not yours answers 404, like what does not exist."""

from __future__ import annotations

from typing import TypeVar

from flask import abort, current_app, request
from flask_login import current_user

from app.chat.models import STREAMING, Conversation
from app.chat.stale import announce, reclaim_if_stale
from app.db import read_transaction
from app.web.identity import db_session

T = TypeVar("T")


def owned_or_404(model: type[T], object_id: int) -> T:
    obj = db_session().get(model, object_id)
    if obj is None or getattr(obj, "user_id", None) != current_user.id:
        abort(404)
    return obj


def owned_before_waiting(model: type[T], object_id: int) -> T:
    """`owned_or_404` in a read transaction that ends here: for a request that then waits
    (reads a body, extracts a file) and must hold no database lock meanwhile."""
    with read_transaction(db_session()):
        return owned_or_404(model, object_id)


def owned_conversation(conversation_id: int) -> Conversation:
    """The caller's conversation, with a run whose heartbeat stopped reclaimed first, so
    a reader never sees a reply that will not come (or is refused a new message)."""
    conversation = owned_or_404(Conversation, conversation_id)
    if conversation.status == STREAMING:
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
