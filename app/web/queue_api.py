"""The JSON API of a chat's queue and of unread chats (docs/CONTRACT.md): routes of the
API blueprint (app/web/api.py), kept here by subject. Queueing itself is the loop route's
`"when": "after"`."""

from __future__ import annotations

from flask import jsonify
from flask_login import login_required
from pydantic import BaseModel

from app.chat.conversations import conversation_dict
from app.chat.models import Conversation
from app.chat.queue import queue_items
from app.db import read_transaction
from app.error_codes import ErrorCode
from app.web.access import owned_conversation_for_turn, owned_or_404
from app.web.api import bp
from app.web.identity import db_session
from app.web.openapi import documented
from app.web.queue_actions import read_now, remove_from_queue, send_queued_now
from app.web.shapes import ChatOut, QueueOut


class QueueSent(BaseModel):
    runId: int  # noqa: N815


@bp.get("/chats/<int:conversation_id>/queue")
@documented("GET", "The messages queued in a chat, oldest first", response=QueueOut)
@login_required
def list_queue(conversation_id: int):
    owned_or_404(Conversation, conversation_id)
    session = db_session()
    with read_transaction(session):
        return jsonify({"queue": queue_items(session, conversation_id)})


@bp.delete("/chats/<int:conversation_id>/queue/<int:queued_id>")
@documented("DELETE", "Take a message off a chat's queue", status=204)
@login_required
def remove_queued_message(conversation_id: int, queued_id: int):
    owned_or_404(Conversation, conversation_id)
    remove_from_queue(conversation_id, queued_id)
    return "", 204


@bp.post("/chats/<int:conversation_id>/queue/<int:queued_id>/send")
@documented(
    "POST",
    "Send a queued message now (no reply being written)",
    response=QueueSent,
    status=202,
    errors=(ErrorCode.RUN_IN_FLIGHT, ErrorCode.QUOTA_EXCEEDED, ErrorCode.TOO_MANY_RUNS),
)
@login_required
def send_queued_message(conversation_id: int, queued_id: int):
    owned_conversation_for_turn(conversation_id)  # a stale run is reclaimed first
    started = send_queued_now(conversation_id, queued_id)
    return jsonify({"runId": started.run.id}), 202


@bp.post("/chats/<int:conversation_id>/read")
@documented("POST", "Mark a chat read (its unread dot goes)", response=ChatOut)
@login_required
def mark_chat_read(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    read_now(conversation)
    return jsonify(conversation_dict(conversation))
