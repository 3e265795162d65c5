"""A preset: a way to start a chat (instructions added to the system prompt, a model, the
tool groups that are on, starter prompts), a person's own or the admin's for everyone
(`user_id` NULL). The rules are app/chat/presets.py's."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import NEVER_REUSED_IDS, Base, utcnow

NAME_MAX_CHARS = 60
INSTRUCTIONS_MAX_CHARS = 4_000
MODEL_MAX_CHARS = 120
STARTERS_MAX = 4
STARTER_MAX_CHARS = 200


class Preset(Base):
    __tablename__ = "presets"
    # One name per person (the database says so); the admin's, whose owner is NULL, are
    # kept apart by app/chat/presets.py (a unique index takes NULLs as all different).
    __table_args__ = (UniqueConstraint("user_id", "name"), NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    # None: the admin's, offered to everyone and changed by admins only.
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(NAME_MAX_CHARS))
    # Added to the system prompt as the person's own, below the house's rules.
    instructions: Mapped[str] = mapped_column(Text, default="")
    # A model's name; "" the default model.
    model: Mapped[str] = mapped_column(String(MODEL_MAX_CHARS), default="")
    # The keys of the tool groups that are on (app/tools/groups.py).
    tool_groups: Mapped[list[Any]] = mapped_column(default=list)
    starters: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    @property
    def shared(self) -> bool:
        return self.user_id is None
