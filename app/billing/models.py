"""Usage events: one per run, keyed so that writing the same run twice counts once."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class UsageEvent(Base):
    __tablename__ = "usage_events"
    __table_args__ = (Index("ix_usage_events_user_month", "user_id", "month"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # `{conversation_id}:chat:{turn_index}`: a redelivered or retried run meters once.
    idempotency_key: Mapped[str] = mapped_column(String(120), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[int | None] = mapped_column(
        ForeignKey("conversations.id", ondelete="SET NULL")
    )
    run_id: Mapped[int | None]
    model: Mapped[str] = mapped_column(String(80))
    billable_tool_calls: Mapped[int] = mapped_column(default=0)
    credits: Mapped[int]
    # Calendar month in UTC, "2026-11": allowances are monthly.
    month: Mapped[str] = mapped_column(String(7))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
