"""Feedback on answers: a thumbs up or down, with an optional comment, that a person gives
one of the host's text rows. One per person per row (a second replaces it); kept with the
run log, linked to the run that wrote the row, so an operator reads it beside what that
run did (`flask chat-logs`, the admin's Run logs page)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, SmallInteger, Text, UniqueConstraint, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.chat.models import Conversation, Message, Run
from app.db import Base, utcnow
from app.kinds import RowKind

UP, DOWN = 1, -1
RATINGS = (UP, DOWN)
MAX_COMMENT_CHARS = 2_000


class AnswerFeedback(Base):
    __tablename__ = "answer_feedback"
    __table_args__ = (UniqueConstraint("message_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    sequence: Mapped[int]  # the row's, as the person and the run log name it
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # The run that wrote the row (None: written before runs were kept, or not by a run).
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), index=True
    )
    rating: Mapped[int] = mapped_column(SmallInteger)  # UP or DOWN
    comment: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)

    @property
    def word(self) -> str:
        return "up" if self.rating == UP else "down"

    def as_dict(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "rating": self.rating,
            "comment": self.comment,
            "runId": self.run_id,
            "updated_at": self.updated_at.isoformat() + "Z",
        }


class FeedbackRefused(Exception):
    """Feedback on a row that does not take it: `missing` (no such row in the chat: 404),
    else a row that is not an answer (a person's message, a card, a tool row)."""

    def __init__(self, message: str, missing: bool = False):
        super().__init__(message)
        self.message = message
        self.missing = missing


def answer_row(session: Session, conversation_id: int, sequence: int) -> Message:
    """The chat's row `sequence` when it is an answer: a host row with text, shown."""
    row = session.scalar(
        select(Message).where(
            Message.conversation_id == conversation_id, Message.sequence == sequence
        )
    )
    if row is None:
        raise FeedbackRefused(f"This chat has no row {sequence}.", missing=True)
    if row.kind != RowKind.HOST or row.hidden or not row.content.strip():
        raise FeedbackRefused(
            f"Row {sequence} is not an answer ({row.kind}): feedback is for the host's replies."
        )
    return row


def run_of_row(session: Session, row: Message) -> int | None:
    """The run that wrote the row: the chat's newest run begun before it (a chat runs one
    at a time); its steps name it when the row is a run's first shown row."""
    steps: Any = row.meta.get("steps") if isinstance(row.meta, dict) else None
    named = steps.get("runId") if isinstance(steps, dict) else None
    if isinstance(named, int):
        return named
    return session.scalar(
        select(Run.id)
        .where(Run.conversation_id == row.conversation_id, Run.created_at <= row.created_at)
        .order_by(Run.created_at.desc(), Run.id.desc())
        .limit(1)
    )


def give_feedback(
    session: Session,
    conversation_id: int,
    sequence: int,
    user_id: int,
    rating: int,
    comment: str | None,
) -> AnswerFeedback:
    """The person's rating of the answer, replacing theirs if any (the caller commits)."""
    row = answer_row(session, conversation_id, sequence)
    comment = (comment or "").strip() or None
    existing = _feedback_of(session, row.id, user_id)
    if existing is None:
        fresh = AnswerFeedback(
            conversation_id=conversation_id,
            message_id=row.id,
            sequence=sequence,
            user_id=user_id,
            run_id=run_of_row(session, row),
            rating=rating,
            comment=comment,
        )
        try:
            with session.begin_nested():
                session.add(fresh)
            return fresh
        except IntegrityError:
            # Another request of theirs wrote it meanwhile: this one replaces it.
            existing = _feedback_of(session, row.id, user_id)
            assert existing is not None
    existing.rating, existing.comment, existing.updated_at = rating, comment, utcnow()
    return existing


def clear_feedback(session: Session, conversation_id: int, sequence: int, user_id: int) -> bool:
    """Take the person's rating of the answer back; False when there was none."""
    row = answer_row(session, conversation_id, sequence)
    existing = _feedback_of(session, row.id, user_id)
    if existing is None:
        return False
    session.delete(existing)
    return True


def _feedback_of(session: Session, message_id: int, user_id: int) -> AnswerFeedback | None:
    return session.scalar(
        select(AnswerFeedback).where(
            AnswerFeedback.message_id == message_id, AnswerFeedback.user_id == user_id
        )
    )


def with_feedback(
    session: Session, conversation: Conversation, rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The rows, each answer the chat's person rated carrying `feedback` (one read)."""
    if not any(row["kind"] == RowKind.HOST for row in rows):
        return rows
    given = {
        item.sequence: item.as_dict()
        for item in session.scalars(
            select(AnswerFeedback).where(
                AnswerFeedback.conversation_id == conversation.id,
                AnswerFeedback.user_id == conversation.user_id,
            )
        )
    }
    for row in rows:
        if row["sequence"] in given:
            row["feedback"] = given[row["sequence"]]
    return rows


# -- reading it back, for operators -----------------------------------------------------


@dataclass(frozen=True)
class FeedbackFilter:
    """Which feedback an operator lists: a rating (UP, DOWN or None for both) and whether
    only feedback with a comment."""

    rating: int | None = None
    commented: bool = False

    def apply(self, query: Any) -> Any:
        if self.rating is not None:
            query = query.where(AnswerFeedback.rating == self.rating)
        if self.commented:
            query = query.where(AnswerFeedback.comment.is_not(None))
        return query


@dataclass(frozen=True)
class FeedbackCounts:
    up: int = 0
    down: int = 0
    commented: int = 0

    @property
    def total(self) -> int:
        return self.up + self.down


def feedback_counts(session: Session, conversation_id: int | None = None) -> FeedbackCounts:
    query = select(
        func.count().filter(AnswerFeedback.rating == UP),
        func.count().filter(AnswerFeedback.rating == DOWN),
        func.count(AnswerFeedback.comment),
    )
    if conversation_id is not None:
        query = query.where(AnswerFeedback.conversation_id == conversation_id)
    up, down, commented = session.execute(query).one()
    return FeedbackCounts(up, down, commented)


def recent_feedback(
    session: Session, wanted: FeedbackFilter, limit: int = 50
) -> list[AnswerFeedback]:
    """The newest feedback that `wanted` lets through, newest first."""
    query = select(AnswerFeedback).order_by(
        AnswerFeedback.updated_at.desc(), AnswerFeedback.id.desc()
    )
    return list(session.scalars(wanted.apply(query).limit(limit)))


def feedback_of_runs(session: Session, run_ids: Iterable[int]) -> dict[int, list[AnswerFeedback]]:
    """Each run's feedback, by row."""
    by_run: dict[int, list[AnswerFeedback]] = {}
    query = (
        select(AnswerFeedback)
        .where(AnswerFeedback.run_id.in_(list(run_ids)))
        .order_by(AnswerFeedback.sequence, AnswerFeedback.id)
    )
    for item in session.scalars(query):
        assert item.run_id is not None
        by_run.setdefault(item.run_id, []).append(item)
    return by_run


def describe_feedback(item: AnswerFeedback) -> str:
    """One readable line: "row 4 · thumbs down · “too long”"."""
    line = f"row {item.sequence} · thumbs {item.word}"
    return f"{line} · “{item.comment}”" if item.comment else line
