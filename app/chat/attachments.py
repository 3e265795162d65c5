"""Attachments as part of a conversation: saved after the row that was latest, and
pending until the person's next message carries them (the queries that read the
conversation's rows live here, in chat; checking and reading files is app/workspace)."""

from __future__ import annotations

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from app.chat.models import Conversation, Message
from app.kinds import RowKind
from app.workspace.attachments import (
    AttachmentRefused,
    AttachmentSummary,
    PreparedAttachment,
)
from app.workspace.models import Attachment


def save_attachment(
    session: Session, user_id: int, conversation_id: int | None, prepared: PreparedAttachment
) -> Attachment:
    """Add the prepared file to the session (flushed, not committed): one short write.
    Raises AttachmentRefused(404) when the conversation went meanwhile."""
    after_sequence = _latest_sequence(session, conversation_id)
    if conversation_id is not None and session.get(Conversation, conversation_id) is None:
        raise AttachmentRefused(404, "Not found.")
    attachment = Attachment(
        user_id=user_id,
        conversation_id=conversation_id,
        filename=prepared.filename,
        content_type=prepared.content_type,
        size=len(prepared.data),
        data=prepared.data,
        text=prepared.text,
        after_sequence=after_sequence,
    )
    session.add(attachment)
    session.flush()
    return attachment


def pending_attachments(
    session: Session, conversation_id: int, since_sequence: int | None = None
) -> list[AttachmentSummary]:
    """The attachments added after the row `since_sequence` (None: the person's previous
    message; 0: every attachment), oldest first: the files the person's next message
    goes with, shown as chips above the composer until it is sent. Ordered by sequence:
    an attachment belongs after the row that was latest when it was uploaded."""
    if since_sequence is None:
        rows = session.execute(_SINCE_LAST_TYPED, {"conversation_id": conversation_id})
        return [AttachmentSummary(*row) for row in rows]
    query = _SUMMARIES.where(_attachments.c.conversation_id == conversation_id)
    if since_sequence > 0:
        query = query.where(_attachments.c.after_sequence >= since_sequence)
    return [AttachmentSummary(*row) for row in session.execute(query.order_by(_attachments.c.id))]


_attachments = Attachment.__table__
_messages = Message.__table__
_SUMMARIES = select(
    _attachments.c.id,
    _attachments.c.filename,
    _attachments.c.content_type,
    _attachments.c.size,
    _attachments.c.created_at,
)
# Read with every message the person sends, built once, in one statement: the files since
# the latest message they typed (not the hidden tool-result rows, also role "user", that
# runs and card answers write); all of them before any (`after_sequence` is never below 0).
# (The newest typed row by the sequence index, walked from the end: no max() over them all.)
_LAST_TYPED_SEQUENCE = (
    select(_messages.c.sequence)
    .where(
        _messages.c.conversation_id == bindparam("conversation_id"),
        _messages.c.kind == RowKind.USER,
    )
    .order_by(_messages.c.sequence.desc())
    .limit(1)
    .scalar_subquery()
)
_SINCE_LAST_TYPED = _SUMMARIES.where(
    _attachments.c.conversation_id == bindparam("conversation_id"),
    _attachments.c.after_sequence >= func.coalesce(_LAST_TYPED_SEQUENCE, 0),
).order_by(_attachments.c.id)


def _latest_sequence(session: Session, conversation_id: int | None) -> int:
    """The conversation's latest row sequence, read under the conversation's lock (the one
    every writer of its rows takes first): a message written at the same moment either
    comes before the attachment, and is counted here, or after it, and sees it."""
    if conversation_id is None:
        return 0
    session.execute(
        select(Conversation.id).where(Conversation.id == conversation_id).with_for_update()
    )
    latest = session.scalar(
        select(func.max(Message.sequence)).where(Message.conversation_id == conversation_id)
    )
    return latest or 0
