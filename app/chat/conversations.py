"""Conversation bookkeeping and the public shape of rows (no Flask here)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.projects import personal_project_id
from app.chat.models import TITLE_DEFAULT, TITLE_PERSON, Conversation, Message
from app.chat.preset_models import Preset
from app.chat.shapes import meta_of
from app.kinds import RowKind
from app.llm.web_search import cited_links

DEFAULT_TITLE = "New chat"


def create_conversation(
    session: Session,
    user_id: int,
    title: str | None = None,
    project_id: int | None = None,
    preset_id: int | None = None,
) -> Conversation:
    """A title given here is the person's (a script's): no model replaces it. A project
    given here is chosen (the caller checked the person may chat in it); without one, the
    chat is in the person's personal project until they choose. A preset given here is
    one the caller checked the person sees (app/chat/presets.py): its model is the chat's
    first pick (the person may pick another; a model no longer offered falls back to the
    default, as any pick does)."""
    title = (title or "").strip()
    conversation = Conversation(
        user_id=user_id,
        project_id=project_id or personal_project_id(session, user_id),
        project_chosen=project_id is not None,
        title=title or DEFAULT_TITLE,
        title_source=TITLE_PERSON if title else TITLE_DEFAULT,
        preset_id=preset_id,
        model=_preset_model(session, preset_id),
    )
    session.add(conversation)
    session.flush()
    return conversation


def _preset_model(session: Session, preset_id: int | None) -> str | None:
    if preset_id is None:
        return None
    return session.scalar(select(Preset.model).where(Preset.id == preset_id)) or None


def rename_conversation(conversation: Conversation, title: str) -> None:
    """The person's own title: kept, never replaced by a proposed one."""
    conversation.title = title.strip()
    conversation.title_source = TITLE_PERSON


class ListedConversation(Protocol):
    """What the conversation list shows of one: a Conversation, or a row of its columns."""

    @property
    def id(self) -> int: ...
    @property
    def title(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def pinned_at(self) -> datetime | None: ...
    @property
    def archived_at(self) -> datetime | None: ...
    @property
    def folder(self) -> str | None: ...
    @property
    def project_id(self) -> int: ...
    @property
    def model(self) -> str | None: ...
    @property
    def unread(self) -> bool: ...
    @property
    def preset_id(self) -> int | None: ...


def conversation_dict(conversation: ListedConversation) -> dict[str, Any]:
    """A chat as the list, the API and the `conversation` frame show it."""
    return {
        "id": conversation.id,
        "title": conversation.title,
        "status": conversation.status,
        "updated_at": conversation.updated_at.isoformat() + "Z",
        "pinned": conversation.pinned_at is not None,
        "archived": conversation.archived_at is not None,
        "folder": conversation.folder,
        "project_id": conversation.project_id,
        "model": conversation.model,
        "unread": bool(conversation.unread),
        "preset_id": conversation.preset_id,
    }


def row_dict(row: Message, siblings: list[int] | None = None) -> dict[str, Any]:
    """A row as the API and the JSON socket show it (docs/CONTRACT.md). `siblings`: the
    alternatives at this point (app/chat/branches.py); without them, the row alone."""
    data: dict[str, Any] = {
        "id": row.id,
        "sequence": row.sequence,
        "parent": row.parent_sequence,
        "siblings": siblings or [row.sequence],
        "role": row.role,
        "kind": row.kind,
        "content": row.content,
        "created_at": row.created_at.isoformat() + "Z",
    }
    meta = meta_of(row)
    if "card" in meta:
        data["card"] = meta["card"]
    if "agentOutput" in meta:
        data["agentOutput"] = meta["agentOutput"]
    if "summary" in meta:
        data["summary"] = meta["summary"]
    if meta.get("stopped"):
        data["stopped"] = True  # Stop ended this answer (or, on a notice, before any text)
    if meta.get("files"):
        data["files"] = meta["files"]  # a person's message: the files it went with
    if row.kind == RowKind.USER and meta.get("untrusted"):
        # A person's message carrying a starter written from a web page (app/chat/taint.py).
        data["untrusted_sources"] = meta["untrusted"]
    if "steps" in meta:
        data["steps"] = meta["steps"]  # the run's steps, kept on its first shown row
    if row.kind in (RowKind.HOST, RowKind.CARD) and meta.get("untrusted"):
        data["untrusted_sources"] = meta["untrusted"]  # the provider's web searches
        links = cited_links(list(meta.get("blocks") or []))
        if links:
            data["citations"] = links  # shown as links under the answer
    return data
