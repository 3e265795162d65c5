"""The MCP server's `ask` tool: a message in one of the person's chats (a new one by
default), started as the JSON API starts it, then the reply, or the card the run paused on,
once the run ends. The wait yields (a hub subscription, then the run's own row), and is
bounded: a run still answering then is reported as running, with its chat's address."""

from __future__ import annotations

import time
from typing import Any

from flask import current_app, url_for
from flask_login import current_user

from app import events as ev
from app.chat.branches import shown_rows
from app.chat.conversations import create_conversation
from app.chat.models import ACTIVE_RUN_STATUSES, Conversation, Run
from app.kinds import RowKind
from app.web.access import owned_conversation_for_turn
from app.web.chat_actions import new_message, start_turn
from app.web.identity import db_session

ASK_WAIT_SECONDS = 120.0


def ask(message: str, chat_id: int | None) -> dict[str, Any]:
    services = current_app.extensions["services"]
    session = db_session()
    if chat_id is None:
        chat_id = create_conversation(session, current_user.id, None).id
        session.commit()
    owned_conversation_for_turn(chat_id)
    subscription = services.hub.subscribe(chat_id)
    try:
        started = start_turn(chat_id, new_message(message))
        run_id, asked_at = started.run.id, max(row.sequence for row in started.rows)
        status = _wait(subscription, run_id)
    finally:
        services.hub.unsubscribe(subscription)
    return {
        "chat_id": chat_id,
        "run_id": run_id,
        "status": status,
        "url": url_for("chat.show", conversation_id=chat_id, _external=True),
        **_reply(chat_id, asked_at),
    }


def _wait(subscription: Any, run_id: int) -> str:
    deadline = time.monotonic() + ASK_WAIT_SECONDS
    while (left := deadline - time.monotonic()) > 0:
        event = subscription.get(timeout=min(1.0, left))
        if isinstance(event, ev.Done) and event.run_id == run_id:
            return str(event.status)
        if event is None and (status := _status(run_id)) not in ACTIVE_RUN_STATUSES:
            return status  # its Done was missed (a full queue): the row says
    return _status(run_id)


def _status(run_id: int) -> str:
    session = db_session()
    run = session.get(Run, run_id)
    assert run is not None  # the person's own, just started
    session.refresh(run)
    status = str(run.status)
    session.commit()
    return status


def _reply(chat_id: int, asked_at: int) -> dict[str, Any]:
    """The text answered after the message, and the card waiting, if any."""
    session = db_session()
    conversation = session.get_one(Conversation, chat_id)
    session.refresh(conversation)
    rows = shown_rows(session, conversation, asked_at)
    session.commit()
    answer = "\n\n".join(
        str(row.get("content") or "") for row in rows if row.get("kind") == RowKind.HOST
    ).strip()
    reply: dict[str, Any] = {"answer": answer}
    card = next((row.get("card") for row in reversed(rows) if row.get("card")), None)
    if card and card.get("status") == "awaiting":
        reply["card"] = {
            "title": card.get("title") or "",
            "questions": [step.get("title", "") for step in card.get("steps") or []],
            "answer_in_the_app": True,
        }
    return reply
