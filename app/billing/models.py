"""Usage events: one per run, keyed so that writing the same run twice counts once."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class UsageEvent(Base):
    __tablename__ = "usage_events"
    __table_args__ = (
        Index("ix_usage_events_user_month", "user_id", "month"),
        Index("ix_usage_events_project_month", "project_id", "month"),
        # A chat's latest event (its context gauge), and the events a deleted chat leaves.
        Index("ix_usage_events_conversation_id", "conversation_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    # `{conversation_id}:chat:{turn_index}`: a redelivered or retried run meters once.
    idempotency_key: Mapped[str] = mapped_column(String(120), unique=True)
    # None once the person is deleted: their runs stay in their projects' totals.
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    conversation_id: Mapped[int | None] = mapped_column(
        ForeignKey("conversations.id", ondelete="SET NULL")
    )
    # The project the run's chat worked in, kept when the chat is deleted (the project's
    # usage stays readable); None once the project is deleted, or for a run before
    # projects whose chat was already gone.
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="SET NULL"))
    run_id: Mapped[int | None]
    model: Mapped[str] = mapped_column(String(80))
    billable_tool_calls: Mapped[int] = mapped_column(default=0)
    credits: Mapped[int]
    # Calendar month in UTC, "2026-11": allowances are monthly.
    month: Mapped[str] = mapped_column(String(7))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
