"""Shared guidelines as admins edit them, and the history of every change."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow

RULE_MAX_CHARS = 1000
GUIDELINE_ACTIONS = ("added", "edited", "enabled", "disabled", "moved", "deleted", "seeded")


class Guideline(Base):
    """One rule every agent follows; enabled rules are appended in `position` order."""

    __tablename__ = "guidelines"

    id: Mapped[int] = mapped_column(primary_key=True)
    position: Mapped[int] = mapped_column(default=0)
    text: Mapped[str] = mapped_column(String(RULE_MAX_CHARS))
    enabled: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class GuidelineChange(Base):
    """Who changed which rule, how, and the text (or position) before and after."""

    __tablename__ = "guideline_changes"

    id: Mapped[int] = mapped_column(primary_key=True)
    guideline_id: Mapped[int | None] = mapped_column(
        ForeignKey("guidelines.id", ondelete="SET NULL"), index=True
    )
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    action: Mapped[str] = mapped_column(String(16))
    before: Mapped[str | None] = mapped_column(Text)
    after: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
