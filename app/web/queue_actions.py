"""What a request does to a chat's queue (app/chat/queue.py): queue a message while a
run answers (or send it when none does), take one off, send one now. One transaction,
then every open page of the chat hears that the queue changed (the `queue` frame)."""

from __future__ import annotations

import time

from flask import current_app
from flask_login import current_user

from app.chat.conversations import conversation_dict, row_dict
from app.chat.models import Conversation, QueuedMessage
from app.chat.queue import queue_items, queue_message, remove_queued, take_next
from app.chat.turn_checks import TurnRejected
from app.chat.turns import StartedTurn
from app.chat.unread import mark_read
from app.error_codes import ErrorCode
from app.events import ConversationChanged, QueueChanged, RowPersisted, Status
from app.web.chat_actions import new_message, refuse_if_unconfirmed, start_turn
from app.web.errors import ApiError
from app.web.identity import db_session


def queue_or_send(conversation_id: int, text: str) -> QueuedMessage | StartedTurn:
    """`text` kept until the run in flight ends; with none in flight, sent at once."""
    refuse_if_unconfirmed()
    session = db_session()
    try:
        item = queue_message(session, conversation_id, current_user.id, text)
    except TurnRejected as rejection:
        session.rollback()
        raise ApiError(rejection.status, rejection.message, rejection.code) from rejection
    if item is None:
        session.rollback()  # nothing written: no run to wait for
        return start_turn(conversation_id, new_message(text))
    session.commit()
    publish_queue(conversation_id)
    return item


def remove_from_queue(conversation_id: int, queued_id: int) -> None:
    """404 when the message is not in this chat's queue (sent already, or removed)."""
    session = db_session()
    if not remove_queued(session, conversation_id, queued_id):
        session.rollback()
        raise ApiError(404, "That message is not queued in this chat.", ErrorCode.NOT_FOUND)
    session.commit()
    publish_queue(conversation_id)


def send_queued_now(conversation_id: int, queued_id: int) -> StartedTurn:
    """A queued message sent now (no run in flight: after a Stop, a card, a failure), off
    the queue in the transaction that starts its run."""
    refuse_if_unconfirmed()
    services = current_app.extensions["services"]
    session = db_session()
    try:
        started = take_next(session, services.settings, conversation_id, current_user.id, queued_id)
        if started is None:
            raise TurnRejected(404, ErrorCode.NOT_FOUND, "That message is not queued in this chat.")
        session.commit()
    except TurnRejected as rejection:
        session.rollback()
        raise ApiError(rejection.status, rejection.message, rejection.code) from rejection
    publish_queue(conversation_id)
    _announce(started, conversation_id)
    return started


def _announce(started: StartedTurn, conversation_id: int) -> None:
    """As a sent message's run is announced and handed over (app/web/chat_actions.py)."""
    services = current_app.extensions["services"]
    for row in started.rows:
        services.hub.publish(conversation_id, RowPersisted(row_dict(row), started.run.id))
    services.hub.publish(
        conversation_id, Status(started.run.id, "thinking", int(time.time() * 1000))
    )
    conversation = db_session().get_one(Conversation, conversation_id)
    services.hub.publish_user(current_user.id, ConversationChanged(conversation_dict(conversation)))
    current_app.extensions["executor"].submit(started.run.id)


def publish_queue(conversation_id: int) -> None:
    """Every open page of the chat shows its queue again (the `queue` frame)."""
    session = db_session()
    items = queue_items(session, conversation_id)
    session.rollback()  # a read: end it (SQLite holds nothing meanwhile)
    current_app.extensions["services"].hub.publish(conversation_id, QueueChanged(items))


def read_now(conversation: Conversation) -> None:
    """The chat read; every tab of the person drops its dot (the `conversation` frame)."""
    session = db_session()
    changed = mark_read(session, conversation.id)
    session.commit()
    if changed:
        session.refresh(conversation)
        current_app.extensions["services"].hub.publish_user(
            current_user.id, ConversationChanged(conversation_dict(conversation))
        )
