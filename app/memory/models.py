"""What the assistant remembers about a person, and why it changed."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class UserMemory(Base):
    """Personal instructions and remembered facts: one row per person."""

    __tablename__ = "user_memories"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    instructions: Mapped[str] = mapped_column(Text, default="")
    facts: Mapped[list[Any]] = mapped_column(default=list)
    # Facts saved from a conversation that had read untrusted content: fact -> the
    # sources it read. A fact no longer in `facts` is ignored (app/chat/provenance.py).
    untrusted_facts: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class MemoryChange(Base):
    """One change to a person's memory: added, superseded (by which fact), forgotten,
    edited, or the instructions rewritten; with the reason and where it came from."""

    __tablename__ = "memory_changes"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    actor_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    action: Mapped[str] = mapped_column(String(16))
    fact: Mapped[str] = mapped_column(Text, default="")
    replaced_by: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
