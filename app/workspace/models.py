"""The person's creative-marketing workspace."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.accounts.project_models import in_personal_project_by_default
from app.db import NEVER_REUSED_IDS, Base, utcnow


def _owner() -> Mapped[int]:
    return mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)


def _maker() -> Mapped[int | None]:
    """Who made it: None once they are deleted (what they made in a shared project stays
    with the project; app/accounts/person_projects.py)."""
    return mapped_column(ForeignKey("users.id", ondelete="SET NULL"), index=True)


def _project() -> Mapped[int]:
    """The project whose workspace holds it (app/accounts/project_models.py); `user_id`
    is who made it."""
    return mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)


def _optional_offer() -> Mapped[int | None]:
    return mapped_column(ForeignKey("offers.id", ondelete="SET NULL"), index=True)


class Offer(Base):
    __tablename__ = "offers"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = _maker()
    project_id: Mapped[int] = _project()
    name: Mapped[str] = mapped_column(String(120))
    description: Mapped[str] = mapped_column(Text, default="")
    audience: Mapped[str] = mapped_column(Text, default="")
    price: Mapped[str] = mapped_column(String(60), default="")
    brand_colors: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    def as_dict(self) -> dict[str, Any]:
        """The offer as the model reads it (an agent's brief, the get_offer tool)."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "audience": self.audience,
            "price": self.price,
            "brand_colors": self.brand_colors,
        }


class Persona(Base):
    __tablename__ = "personas"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = _maker()
    project_id: Mapped[int] = _project()
    offer_id: Mapped[int | None] = _optional_offer()
    name: Mapped[str] = mapped_column(String(120))
    description: Mapped[str] = mapped_column(Text, default="")
    pains: Mapped[str] = mapped_column(Text, default="")
    goals: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class VisualAsset(Base):
    __tablename__ = "visual_assets"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = _maker()
    project_id: Mapped[int] = _project()
    offer_id: Mapped[int | None] = _optional_offer()
    kind: Mapped[str] = mapped_column(String(16), default="image")
    title: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text, default="")
    preset: Mapped[str] = mapped_column(String(80), default="")
    content_type: Mapped[str] = mapped_column(String(80), default="image/png")
    data: Mapped[bytes | None] = mapped_column(LargeBinary)
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # What untrusted content (a web page, an attachment...) the conversation that made it
    # had read: None when it came from trusted input only (app/chat/provenance.py).
    untrusted_sources: Mapped[list[Any] | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    @property
    def is_draft(self) -> bool:
        """A local draft render (or the demo's placeholder): not the preset's look."""
        meta = self.meta or {}
        return bool(meta.get("draft") or meta.get("placeholder"))


class Output(Base):
    """A saved agent result (a quiz, ad copy...), linked to its offer and conversation."""

    __tablename__ = "outputs"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = _maker()
    project_id: Mapped[int] = _project()
    offer_id: Mapped[int | None] = _optional_offer()
    conversation_id: Mapped[int | None] = mapped_column(
        ForeignKey("conversations.id", ondelete="SET NULL"), index=True
    )
    agent: Mapped[str] = mapped_column(String(60))
    title: Mapped[str] = mapped_column(String(200))
    content: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # What untrusted content (a web page, an attachment...) the conversation that made it
    # had read: None when it came from trusted input only (app/chat/provenance.py).
    untrusted_sources: Mapped[list[Any] | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Character(Base):
    __tablename__ = "characters"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = _maker()
    project_id: Mapped[int] = _project()
    persona_id: Mapped[int | None] = mapped_column(
        ForeignKey("personas.id", ondelete="SET NULL"), index=True
    )
    portrait_asset_id: Mapped[int | None] = mapped_column(
        ForeignKey("visual_assets.id", ondelete="SET NULL"), index=True
    )
    name: Mapped[str] = mapped_column(String(120))
    description: Mapped[str] = mapped_column(Text, default="")
    # What untrusted content (a web page, an attachment...) the conversation that made it
    # had read: None when it came from trusted input only (app/chat/provenance.py).
    untrusted_sources: Mapped[list[Any] | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Campaign(Base):
    __tablename__ = "campaigns"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = _maker()
    project_id: Mapped[int] = _project()
    offer_id: Mapped[int | None] = _optional_offer()
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(24), default="draft")
    briefing: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # What untrusted content (a web page, an attachment...) the conversation that made it
    # had read: None when it came from trusted input only (app/chat/provenance.py).
    untrusted_sources: Mapped[list[Any] | None] = mapped_column(default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class ImagePreset(Base):
    """A look for generated images; user_id None means shared by everyone."""

    __tablename__ = "image_presets"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(80))
    description: Mapped[str] = mapped_column(Text, default="")
    style: Mapped[str] = mapped_column(Text, default="")
    aspect_ratio: Mapped[str] = mapped_column(String(12), default="1:1")


class Attachment(Base):
    __tablename__ = "attachments"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = _owner()
    conversation_id: Mapped[int | None] = mapped_column(
        ForeignKey("conversations.id", ondelete="SET NULL"), index=True
    )
    filename: Mapped[str] = mapped_column(String(255))
    content_type: Mapped[str] = mapped_column(String(120))
    size: Mapped[int]
    data: Mapped[bytes] = mapped_column(LargeBinary)
    text: Mapped[str] = mapped_column(Text, default="")
    # The conversation's latest message sequence when the file was attached: it belongs
    # after that row, and is announced with the person's next message (timestamps cannot
    # order it against rows written at the same moment).
    after_sequence: Mapped[int] = mapped_column(default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


for _model in (Offer, Persona, VisualAsset, Output, Character, Campaign):
    in_personal_project_by_default(_model)
