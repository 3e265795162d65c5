"""Share links: a read-only view of a chat's shown branch, and a copy of it to continue.

A link is a random token (`secrets.token_urlsafe(32)`, 256 bits) shown once to its owner;
only its SHA-256 digest is stored, as API tokens are. A chat has at most one live link:
making a new one revokes the old (so an owner who lost the link makes another, and the
lost one stops working). A link is live until revoked, until its optional expiry, or until
the chat is deleted (its rows go with it).

The shared page shows exactly the rows the chat page shows for the shown branch
(`shown_rows`), made public with `public_row`: no files, no run steps, a card as its
question and answer only. Continuing copies the shown branch, hidden rows included, into a
new chat of the viewer (`copy_shared`): the model must be able to continue it, so every
tool call keeps its result. The copy of someone else's chat is tainted
(app/chat/taint.py): its messages were not typed by the viewer, so an address in them is
not one the viewer typed, and the words may try to steer the viewer's tools."""

from __future__ import annotations

import copy
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from app.chat.branches import branch_rows, shown_rows
from app.chat.conversations import create_conversation
from app.chat.models import TITLE_DEFAULT, ChatShare, Conversation, Message
from app.chat.rows import insert_message
from app.db import utcnow
from app.kinds import CardStatus, OutputKind, RowKind

MAX_EXPIRES_DAYS = 365
# What `secrets.token_urlsafe(32)` gives: 43 characters of the URL-safe alphabet. Anything
# else is not a token this server made, and is not looked up.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")
# What a copied message says it was written from (app/chat/provenance.py's `source_label`).
SHARED_SOURCE = "shared_chat"


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _live(now: datetime) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    return (
        ChatShare.revoked_at.is_(None),
        (ChatShare.expires_at.is_(None)) | (ChatShare.expires_at > now),
    )


def live_share(session: Session, conversation_id: int) -> ChatShare | None:
    """The chat's live link (its token is never kept), or None."""
    return session.scalar(
        select(ChatShare)
        .where(ChatShare.conversation_id == conversation_id, *_live(utcnow()))
        .order_by(ChatShare.id.desc())
        .limit(1)
    )


def revoke_share(session: Session, conversation_id: int) -> bool:
    """Revoke the chat's link; True when there was a live one (the caller commits)."""
    now = utcnow()
    result = session.execute(
        update(ChatShare)
        .where(ChatShare.conversation_id == conversation_id, *_live(now))
        .values(revoked_at=now)
    )
    return bool(getattr(result, "rowcount", 0))


def create_share(
    session: Session, conversation: Conversation, user_id: int, expires_days: int | None
) -> tuple[ChatShare, str]:
    """A new link for the chat, replacing any live one; the raw token, shown once. One
    transaction with the revoke (the caller commits)."""
    if expires_days is not None and not 1 <= expires_days <= MAX_EXPIRES_DAYS:
        raise ValueError(f"expires_days must be 1..{MAX_EXPIRES_DAYS}")
    # Two makers at once (PostgreSQL) take turns: each revokes what the other made.
    session.execute(
        select(Conversation.id).where(Conversation.id == conversation.id).with_for_update()
    )
    revoke_share(session, conversation.id)
    raw = secrets.token_urlsafe(32)
    now = utcnow()
    share = ChatShare(
        conversation_id=conversation.id,
        token_digest=token_digest(raw),
        created_by=user_id,
        created_at=now,
        expires_at=now + timedelta(days=expires_days) if expires_days else None,
    )
    session.add(share)
    session.flush()
    return share, raw


@dataclass(frozen=True)
class Shared:
    share: ChatShare
    conversation: Conversation


def shared_by_token(session: Session, raw: str) -> Shared | None:
    """The live link with this token and its chat; None for a revoked, expired or unknown
    token alike (the caller answers the same 404 for each)."""
    if not TOKEN_SHAPE.fullmatch(raw):
        return None
    share = session.scalar(
        select(ChatShare).where(ChatShare.token_digest == token_digest(raw), *_live(utcnow()))
    )
    if share is None:
        return None
    conversation = session.get(Conversation, share.conversation_id)
    if conversation is None:
        return None
    return Shared(share, conversation)


def public_row(row: dict[str, Any]) -> dict[str, Any]:
    """A shown row as a reader of the link sees it: no files (attachments are not
    shared), no run steps (they link to the owner's workspace), a card reduced to its
    question and answer (never a held call's arguments, address or memory change)."""
    private = ("files", "steps", "feedback")  # feedback: the owner's own rating
    public = {key: value for key, value in row.items() if key not in private}
    card = row.get("card")
    if isinstance(card, dict):
        kept = ("toolUseId", "tool", "kind", "title", "steps", "status", "answer", "resultKey")
        public["card"] = {key: card[key] for key in kept if key in card}
    return public


def shared_rows(session: Session, conversation: Conversation) -> list[dict[str, Any]]:
    return [public_row(row) for row in shown_rows(session, conversation)]


class NothingToCopy(Exception):
    """The sequence asked for is not a shown row of the shared branch."""


def copy_shared(
    session: Session, conversation: Conversation, viewer_id: int, upto: int | None = None
) -> Conversation:
    """A new chat of the viewer holding the shared chat's shown branch up to its shown row
    `upto` (by default the last shown row). Every row of the branch up to there is
    copied in order, hidden ones included, and the tool results right after it (so no tool
    call is left without its result). What the viewer cannot have is left out: files,
    run steps, made images (their assets are the owner's), summaries of the original's
    compaction. A card still waiting is copied as dismissed. The caller commits: the copy
    is one transaction."""
    shown = [row["sequence"] for row in shown_rows(session, conversation)]
    if upto is None:
        upto = shown[-1] if shown else 0
    elif upto not in shown:
        raise NothingToCopy(upto)
    rows = _rows_through(branch_rows(session, conversation), upto)
    foreign = viewer_id != conversation.user_id
    title = None if conversation.title_source == TITLE_DEFAULT else conversation.title
    copied = create_conversation(session, viewer_id, title)
    copied.tool_phase = conversation.tool_phase
    for row in rows:
        meta = _copied_meta(row, conversation, foreign)
        if meta is None:
            continue
        insert_message(
            session, copied.id, role=row.role, kind=row.kind, content=row.content, meta=meta
        )
    return copied


def _rows_through(rows: list[Message], upto: int) -> list[Message]:
    kept = [row for row in rows if row.sequence <= upto]
    for row in rows[len(kept) :]:
        if row.kind != RowKind.TOOL_RESULT:
            break
        kept.append(row)  # the results of the last copied row's tool calls
    return kept


def _copied_meta(row: Message, conversation: Conversation, foreign: bool) -> dict[str, Any] | None:
    meta: dict[str, Any] = copy.deepcopy(dict(row.meta or {}))
    meta.pop("files", None)
    meta.pop("steps", None)
    output = meta.get("agentOutput")
    if isinstance(output, dict) and output.get("kind") == OutputKind.IMAGE:
        return None  # a made image: its asset is the owner's
    if row.kind == RowKind.NOTICE and "summary" in meta:
        return None  # the original's compaction; the copy compacts on its own
    card = meta.get("card")
    if isinstance(card, dict) and card.get("status", CardStatus.AWAITING) == CardStatus.AWAITING:
        card["status"] = CardStatus.DISMISSED
        meta["awaiting"] = None
    if foreign and row.kind == RowKind.USER:
        source = {SHARED_SOURCE: conversation.title}
        meta["untrusted"] = [*(meta.get("untrusted") or []), source]
    return meta
