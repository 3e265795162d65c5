"""The JSON API (CONTRACT.md). Browsers send the CSRF header; scripts a bearer token."""

from __future__ import annotations

from flask import Blueprint, jsonify, request
from flask_login import current_user, login_required

from app.chat.conversations import (
    conversation_dict,
    conversations_for,
    create_conversation,
    row_dict,
)
from app.chat.models import Conversation
from app.chat.rows import rows_after
from app.web.access import owned_or_404
from app.web.errors import ApiError
from app.web.identity import db_session

bp = Blueprint("api", __name__, url_prefix="/api")


def json_body() -> dict:
    """The request's JSON object, or a 4xx that says what is wrong with it."""
    if not request.is_json:
        raise ApiError(415, "Send a JSON body with Content-Type: application/json.")
    data = request.get_json(silent=True)
    if data is None:
        raise ApiError(400, "The body is not valid JSON.", "INVALID_JSON")
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object.", "INVALID_JSON")
    return data


def optional_string(data: dict, key: str, max_length: int) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"'{key}' must be a string.", "INVALID_FIELD")
    if len(value) > max_length:
        raise ApiError(400, f"'{key}' is longer than {max_length} characters.", "INVALID_FIELD")
    return value


@bp.post("/chats")
@login_required
def create_chat():
    data = json_body() if request.content_length else {}
    title = optional_string(data, "title", 120)
    session = db_session()
    conversation = create_conversation(session, current_user.id, title)
    session.commit()
    return jsonify({"id": conversation.id}), 201


@bp.get("/chats")
@login_required
def list_chats():
    chats = conversations_for(db_session(), current_user.id)
    return jsonify({"chats": [conversation_dict(c) for c in chats]})


@bp.get("/chats/<int:conversation_id>/messages")
@login_required
def list_messages(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    after = request.args.get("after", "0")
    if not after.isdigit():
        raise ApiError(400, "'after' must be a non-negative whole number.", "INVALID_FIELD")
    rows = rows_after(db_session(), conversation.id, int(after))
    return jsonify({"messages": [row_dict(row) for row in rows]})
