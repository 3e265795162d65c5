"""The chat's queue: messages a person sends while a run answers, kept until it ends
(docs/CONTRACT.md, "Queue and steer"). No Flask here.

When a run completes, the oldest queued message starts the next run, as a sent message
does, in the transaction that takes it off the queue (`take_next`; any process that ran
the run does it: app/chat/queue_drain.py). The queue holds while the chat waits on a card
(it goes on once the card's answer has run), and after a Stop or a failure: the next run
the person starts themselves drains it when it completes, or they send one now."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.chat.models import ACTIVE_RUN_STATUSES, QueuedMessage, Run, RunStatus
from app.chat.runs import active_run
from app.chat.turn_checks import TurnRejected, lock_for_turn
from app.chat.turns import StartedTurn, submit_message
from app.config import Settings
from app.db import Database, rows_changed, utcnow
from app.error_codes import ErrorCode
from app.telemetry.metrics import QueueCollector, QueueDepth

# At most this many messages wait per chat: a queue is a short to-do, not a backlog.
QUEUE_LIMIT = 5


def queued_messages(session: Session, conversation_id: int) -> list[QueuedMessage]:
    """The chat's queue, oldest (sent next) first."""
    return list(
        session.scalars(
            select(QueuedMessage)
            .where(QueuedMessage.conversation_id == conversation_id)
            .order_by(QueuedMessage.id)
        )
    )


def queued_dict(item: QueuedMessage) -> dict[str, Any]:
    """A queued message as the API and the `queue` frame show it."""
    return {
        "id": item.id,
        "message": item.content,
        "created_at": item.created_at.isoformat() + "Z",
    }


def queue_items(session: Session, conversation_id: int) -> list[dict[str, Any]]:
    return [queued_dict(item) for item in queued_messages(session, conversation_id)]


def queue_message(
    session: Session, conversation_id: int, user_id: int, text: str
) -> QueuedMessage | None:
    """Keep `text` to send when the chat's run ends, in the caller's transaction; None when
    no run is in flight (the caller sends it at once instead). 409 QUEUE_FULL beyond
    QUEUE_LIMIT; 404 when the chat is not the person's."""
    locked = lock_for_turn(session, conversation_id, user_id)
    if locked is None:
        raise TurnRejected(404, ErrorCode.NOT_FOUND, "Not found.")
    if active_run(session, conversation_id) is None:
        return None
    held = session.scalar(
        select(func.count(QueuedMessage.id)).where(QueuedMessage.conversation_id == conversation_id)
    )
    if (held or 0) >= QUEUE_LIMIT:
        raise TurnRejected(
            409,
            ErrorCode.QUEUE_FULL,
            f"This chat already has {QUEUE_LIMIT} queued messages: remove one, or wait "
            "for the reply to finish.",
        )
    item = QueuedMessage(conversation_id=conversation_id, content=text)
    session.add(item)
    session.flush()
    return item


def remove_queued(session: Session, conversation_id: int, queued_id: int) -> bool:
    """Take one message off the chat's queue; False when it is not queued there (sent
    already, removed, or never this chat's)."""
    removed = session.execute(
        delete(QueuedMessage).where(
            QueuedMessage.id == queued_id, QueuedMessage.conversation_id == conversation_id
        )
    )
    return rows_changed(removed) == 1


def take_next(
    session: Session,
    settings: Settings,
    conversation_id: int,
    user_id: int,
    queued_id: int | None = None,
) -> StartedTurn | None:
    """The oldest queued message (or `queued_id`) started as the chat's next turn and
    taken off the queue, in the caller's transaction. None when nothing is queued;
    TurnRejected when no turn may start now (a run in flight, the person's limits): it
    then stays queued."""
    if lock_for_turn(session, conversation_id, user_id) is None:
        raise TurnRejected(404, ErrorCode.NOT_FOUND, "Not found.")
    query = select(QueuedMessage).where(QueuedMessage.conversation_id == conversation_id)
    if queued_id is not None:
        query = query.where(QueuedMessage.id == queued_id)
    item = session.scalar(query.order_by(QueuedMessage.id).limit(1))
    if item is None:
        return None
    started = submit_message(session, settings, conversation_id, user_id, item.content)
    session.delete(item)
    session.flush()
    return started


# What waits, for a metrics scrape: two aggregate reads (the queued runs through the
# partial index of active runs), however many chats there are.
_QUEUED_MESSAGES = select(func.count(QueuedMessage.id), func.min(QueuedMessage.created_at))
_QUEUED_RUNS = select(func.count(Run.id), func.min(Run.created_at)).where(
    Run.status.in_(ACTIVE_RUN_STATUSES), Run.status == RunStatus.QUEUED
)


def queue_depth(session: Session) -> QueueDepth:
    """Messages in the chats' queues and runs no executor has claimed yet, each with how
    long its oldest has waited."""
    now = utcnow()
    messages, oldest_message = session.execute(_QUEUED_MESSAGES).one()
    runs, oldest_run = session.execute(_QUEUED_RUNS).one()
    return QueueDepth(
        queued_messages=int(messages or 0),
        oldest_message_seconds=_age(now, oldest_message),
        queued_runs=int(runs or 0),
        oldest_run_seconds=_age(now, oldest_run),
    )


def _age(now: datetime, since: datetime | None) -> float:
    return max(0.0, (now - since).total_seconds()) if since is not None else 0.0


def queue_collector(database: Database) -> QueueCollector:
    """The queue's depth and age for a metrics scrape, read from `database` each time."""

    def read() -> QueueDepth:
        with database.session() as session:
            return queue_depth(session)

    return QueueCollector(read)
