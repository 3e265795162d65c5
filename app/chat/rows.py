"""The one place that allocates message sequences. Every writer of message rows calls
`insert_message`; readers order by sequence."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, case, func, insert, select
from sqlalchemy.orm import Session, SessionTransaction, make_transient_to_detached

from app.chat.models import Conversation, Message
from app.chat.search import index_row
from app.db import utcnow
from app.kinds import RowKind
from app.llm.budget import estimate_blocks
from app.row_meta import ToolResultMeta

_messages = cast(Table, Message.__table__)  # typed as any FromClause
_conversations = cast(Table, Conversation.__table__)  # typed as any FromClause
# Built once: composing a statement costs more Python than running this one does.
_LOCK_CONVERSATION = (
    select(_conversations.c.id)
    .where(_conversations.c.id == bindparam("conversation_id"))
    .with_for_update()
)
_LAST_SEQUENCE = (
    select(func.max(_messages.c.sequence))
    .where(_messages.c.conversation_id == bindparam("of_conversation"))
    .scalar_subquery()
)
# The row a new one follows: the shown branch's leaf (app/chat/branches.py::leaf_of). Rows
# written since the branch was chosen continue it (the last row); before any, the leaf
# chosen. Computed by the INSERT too, so the insert stays one statement.
_PARENT = (
    select(
        case(
            (
                and_(
                    _conversations.c.branch_chosen_at_sequence.is_not(None),
                    func.coalesce(_LAST_SEQUENCE, 0) <= _conversations.c.branch_chosen_at_sequence,
                ),
                _conversations.c.branch_leaf_sequence,
            ),
            else_=_LAST_SEQUENCE,
        )
    )
    .where(_conversations.c.id == bindparam("of_conversation"))
    .scalar_subquery()
)
_INSERT_NEXT = (
    insert(_messages)
    .values(
        sequence=select(func.coalesce(func.max(_messages.c.sequence), 0) + 1)
        .where(_messages.c.conversation_id == bindparam("of_conversation"))
        .scalar_subquery(),
        parent_sequence=_PARENT,
    )
    .returning(_messages.c.id, _messages.c.sequence, _messages.c.parent_sequence)
)


# Conversations whose row this session's current transaction has locked already (by
# `lock_conversation` or an earlier insert): each maps to the (innermost) transaction that
# took the lock; another transaction, or a savepoint, locks again (a savepoint rolled back
# may release it).
_LOCKED = "loopdesk_locked_conversations"


def _innermost(session: Session) -> SessionTransaction | None:
    return session.get_nested_transaction() or session.get_transaction()


def note_conversation_locked(session: Session, conversation_id: int) -> None:
    session.info.setdefault(_LOCKED, {})[conversation_id] = _innermost(session)


def _conversation_locked(session: Session, conversation_id: int) -> bool:
    holder = session.info.get(_LOCKED, {}).get(conversation_id)
    return holder is not None and holder is _innermost(session)


def insert_message(
    session: Session,
    conversation_id: int,
    *,
    role: str,
    kind: str,
    content: str = "",
    meta: Mapping[str, Any] | None = None,
) -> Message:
    """Append a row with the next sequence, inside the caller's transaction, after the
    shown branch's leaf (its `parent_sequence`).

    The sequence is computed by the INSERT itself (max+1) and guarded by the unique index
    on (conversation, sequence). Writers of one conversation are serialized first, so the
    max+1 never collides and no savepoint or retry is needed: on SQLite by the database's
    write lock (every transaction is BEGIN IMMEDIATE), elsewhere by locking the
    conversation row. (A collision would still be refused by the index, never written.)
    """
    if session.get_bind().dialect.name != "sqlite" and not _conversation_locked(
        session, conversation_id
    ):
        # Once per transaction: a second lock of the same row is a round-trip for nothing.
        session.execute(_LOCK_CONVERSATION, {"conversation_id": conversation_id})
        note_conversation_locked(session, conversation_id)
    meta = dict(meta or {})
    if meta.get("blocks") and "tokens" not in meta:
        meta["tokens"] = estimate_blocks(meta["blocks"])  # cached for budgeting
    values = {
        "conversation_id": conversation_id,
        "role": role,
        "kind": kind,
        "content": content,
        "meta": meta,
        "created_at": utcnow(),
    }
    inserted = session.execute(_INSERT_NEXT, {**values, "of_conversation": conversation_id}).one()
    row = _persistent_row(
        session,
        {
            **values,
            "id": inserted.id,
            "sequence": inserted.sequence,
            "parent_sequence": inserted.parent_sequence,
        },
    )
    index_row(session, row, new=True)  # searchable in the same transaction
    return row


def insert_tool_result(
    session: Session,
    conversation_id: int,
    tool_use_id: str,
    tool_name: str,
    content: Any,
    *,
    is_error: bool = False,
    untrusted: list[dict[str, Any]] | None = None,
) -> Message:
    """The hidden row that answers one tool_use: what the model reads, never rendered.
    `untrusted`: the untrusted content it carries (app/chat/taint.py reads it)."""
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": result_text(content),
    }
    if is_error:
        block["is_error"] = True
    meta: ToolResultMeta = {"blocks": [block], "hidden": True, "tool": tool_name}
    if untrusted:
        meta["untrusted"] = untrusted
    return insert_message(
        session, conversation_id, role="user", kind=RowKind.TOOL_RESULT, meta=meta
    )


def result_text(content: Any) -> str:
    """A tool result as the model reads it (never empty: the API refuses empty text)."""
    if isinstance(content, str):
        return content or "(no output)"
    return json.dumps(content, ensure_ascii=False, default=str)


def _persistent_row(session: Session, values: dict[str, Any]) -> Message:
    """The row just inserted, as if loaded by a query (no second read): created the way
    SQLAlchemy's loader creates instances, which skips the constructor's per-attribute
    change tracking (that alone cost as much as the INSERT)."""
    row = Message.__mapper__.class_manager.new_instance()
    row.__dict__.update(values)
    make_transient_to_detached(row)
    session.add(row)
    made: Message = row
    return made
