"""The one place that allocates message sequences. Every writer of message rows calls
`insert_message`; readers order by sequence."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from app.chat.budget import estimate_blocks
from app.chat.models import Conversation, Message
from app.db import utcnow

MAX_ATTEMPTS = 60
LOCKED_WRITERS = True


def insert_message(
    session: Session,
    conversation_id: int,
    *,
    role: str,
    kind: str,
    content: str = "",
    meta: dict[str, Any] | None = None,
) -> Message:
    """Append a row with the next sequence, inside the caller's transaction.

    The sequence is computed by the INSERT itself (max+1) and guarded by the unique index
    on (conversation, sequence). Writers of one conversation are serialized first, so the
    max+1 never collides and no savepoint or retry is needed: on SQLite by the database's
    write lock (every transaction is BEGIN IMMEDIATE), elsewhere by locking the
    conversation row. (A collision would still be refused by the index, never written.)
    """
    if session.get_bind().dialect.name != "sqlite":
        session.execute(
            select(Conversation.id).where(Conversation.id == conversation_id).with_for_update()
        )
    next_sequence = (
        select(func.coalesce(func.max(Message.sequence), 0) + 1)
        .where(Message.conversation_id == conversation_id)
        .scalar_subquery()
    )
    meta = dict(meta or {})
    if meta.get("blocks") and "tokens" not in meta:
        meta["tokens"] = estimate_blocks(meta["blocks"])  # cached for budgeting
    statement = (
        insert(Message)
        .values(
            conversation_id=conversation_id,
            sequence=next_sequence,
            role=role,
            kind=kind,
            content=content,
            meta=meta,
            created_at=utcnow(),
        )
        .returning(Message)
    )
    return session.scalars(statement).one()


def rows_after(session: Session, conversation_id: int, after: int = 0, *, include_hidden=False):
    """Rows with a sequence above `after`, in order."""
    query = (
        select(Message)
        .where(Message.conversation_id == conversation_id, Message.sequence > after)
        .order_by(Message.sequence)
    )
    rows = session.scalars(query).all()
    return rows if include_hidden else [row for row in rows if not row.hidden]
