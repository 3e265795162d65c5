"""Prompt-injection taint: once a run has read untrusted content (a web page, an
attachment), whatever that content says could be steering the model. From then on, every
call that changes something, and any fetch to a host the person never named, waits for
the person's approval of its exact arguments. The model cannot turn this off."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.chat.models import Message
from app.tools.registry import Pause, Tool, ToolRegistry, confirmation

URL_TOOLS = {"fetch_url"}
HOST_PATTERN = re.compile(
    r"\b(?:https?://)?((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}|\d{1,3}(?:\.\d{1,3}){3})\b",
    re.I,
)
REASON = (
    "This conversation has read outside content (a web page or an attachment) that could "
    "contain instructions meant for the assistant. Check that this is something you asked for."
)


def rows_since_last_message(session: Session, conversation_id: int) -> list[Message]:
    last_typed = (
        session.scalar(
            select(Message.sequence)
            .where(Message.conversation_id == conversation_id, Message.kind == "user")
            .order_by(Message.sequence.desc())
            .limit(1)
        )
        or 0
    )
    return list(
        session.scalars(
            select(Message)
            .where(Message.conversation_id == conversation_id, Message.sequence > last_typed)
            .order_by(Message.sequence)
        )
    )


def is_tainted(session: Session, conversation_id: int, registry: ToolRegistry) -> bool:
    """Untrusted content was consumed since the person last wrote."""
    for row in rows_since_last_message(session, conversation_id):
        if row.kind != "tool_result":
            continue
        tool = registry.get(row.meta.get("tool", ""))
        failed = any(block.get("is_error") for block in row.meta.get("blocks", []))
        if tool is not None and tool.untrusted and not failed:
            return True
    return False


def named_hosts(session: Session, conversation_id: int) -> set[str]:
    """Hosts the person wrote themselves anywhere in this conversation."""
    texts = session.scalars(
        select(Message.content).where(
            Message.conversation_id == conversation_id, Message.kind == "user"
        )
    )
    return {match.lower() for text in texts for match in HOST_PATTERN.findall(text or "")}


def held_for_approval(tool: Tool, arguments: dict[str, Any], hosts: set[str]) -> Pause | None:
    """The confirmation card for a call a tainted run may not make on its own, or None."""
    if tool.on_approved is not None:
        return None  # it asks the person itself
    if not tool.read_only:
        return confirmation(arguments, REASON, f"Allow {tool.name.replace('_', ' ')}?")
    if tool.name in URL_TOOLS:
        host = (urlsplit(str(arguments.get("url", ""))).hostname or "").lower()
        if host not in hosts:
            reason = (
                f"{REASON} You have not mentioned {host or 'this address'} in this conversation."
            )
            return confirmation(arguments, reason, f"Allow fetching {host or 'this address'}?")
    return None
