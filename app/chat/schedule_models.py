"""A scheduled message: a chat's owner has it sent into the chat on a cron schedule, in
their time zone (app/chat/schedules.py keeps the rules; app/chat/scheduler.py sends it)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from app.db import NEVER_REUSED_IDS, Base, utcnow


class ChatSchedule(Base):
    __tablename__ = "chat_schedules"
    __table_args__ = (
        # The scheduler's one question: which live schedules are due.
        Index("ix_chat_schedules_due", "paused", "next_run_at"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    # A person's schedules (their settings page, their data's export; their deletion).
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    cron: Mapped[str] = mapped_column(String(120))  # five fields, minute resolution
    timezone: Mapped[str] = mapped_column(String(64))  # an IANA name
    message: Mapped[str] = mapped_column(Text)
    paused: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The tick to send next (naive UTC). A scheduler claims it by moving it on with a
    # compare-and-set (`WHERE next_run_at = :seen`), so one tick is sent once.
    next_run_at: Mapped[datetime]
    last_run_at: Mapped[datetime | None]
    # What the last tick did, for the person: None (sent), or why it was not sent.
    last_error: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
