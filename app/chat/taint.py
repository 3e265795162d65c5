"""Prompt-injection taint: a property of what the model is sent, computed from rows.

A conversation is tainted while any untrusted content is in what its model receives: a
tool result that carried untrusted content (a fetched page, an attached file, a saved
output made from one: the row's `untrusted` sources), which stays in the history or in
the summary compacted from it, a message sent from words written from untrusted content
(a starter made from the person's website: its row's `untrusted`), or a remembered fact
that came from untrusted content (it is in every system prompt). Nothing the person types
clears it, and any process computes the same answer from the same rows.

While tainted, every call that writes (`Tool.writes`) and every fetch of a URL the person
did not type themselves waits for the person's approval of its exact arguments (an
address in a message written from untrusted content was not typed by them). The model
cannot turn this off; reading the workspace never asks."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, case, select
from sqlalchemy.orm import Session

from app.chat.models import Message
from app.chat.provenance import untrusted_facts
from app.kinds import RowKind
from app.memory.models import UserMemory
from app.tools.held import REASON, fetch_confirmation
from app.tools.registry import Tool, ToolRegistry
from app.tools.results import Pause, confirmation
from app.tools.urls import normal_url, url_view

# Read in the transaction that claims every run, so built once, in one statement: the
# sources of every row the model is sent (only the small parts of each result row, never
# the page text itself; of the person's messages the sources a starter's text carried), and
# the text of the person's messages (the addresses they typed).
_TAINT_ROWS = select(
    Message.kind,
    Message.meta["untrusted"],
    Message.meta["tool"].as_string(),
    Message.meta[("blocks", 0, "is_error")].as_boolean(),
    case((Message.kind == RowKind.USER, Message.content)),
).where(
    Message.conversation_id == bindparam("conversation_id"),
    Message.kind.in_((RowKind.TOOL_RESULT, RowKind.USER, RowKind.HOST)),
)
TYPED_URL = re.compile(r"https?://[^\s<>\"'`]+", re.I)
TRAILING = ".,;:!?)]}»”’"


def conversation_taint(
    session: Session, conversation_id: int, registry: ToolRegistry, memory: UserMemory | None
) -> tuple[list[dict[str, Any]], set[str]]:
    """The untrusted content this conversation's model is sent (empty when none), and every
    full URL the person typed themselves in it (normalized). `memory`: its owner's (facts
    remembered from untrusted content are in every prompt)."""
    rows = session.execute(_TAINT_ROWS, {"conversation_id": conversation_id}).all()
    sources: list[dict[str, Any]] = []

    def add(source: dict[str, Any]) -> None:
        if source not in sources:
            sources.append(source)

    for _kind, recorded, tool_name, failed, _text in rows:
        for source in _row_sources(recorded, tool_name, bool(failed), registry):
            add(source)
    for fact in untrusted_facts(memory):
        add({"memory": fact})
    typed = _typed_in(
        (text, recorded) for kind, recorded, _, _, text in rows if kind == RowKind.USER
    )
    return sources, typed


def untrusted_sources(
    session: Session, conversation_id: int, registry: ToolRegistry, memory: UserMemory | None
) -> list[dict[str, Any]]:
    """The untrusted content this conversation's model is sent; empty when none."""
    return conversation_taint(session, conversation_id, registry, memory)[0]


def _row_sources(
    recorded: Any, tool_name: str | None, failed: bool, registry: ToolRegistry
) -> list[dict[str, Any]]:
    if recorded:
        return list(recorded)
    # Rows written before sources were recorded: the tool's own flag decides.
    tool = registry.get(tool_name or "")
    if tool is not None and tool.untrusted and not failed:
        return [{"tool": tool.name}]
    return []


def typed_urls(session: Session, conversation_id: int) -> set[str]:
    """Every full URL the person typed themselves in this conversation (normalized)."""
    return conversation_taint(session, conversation_id, ToolRegistry(), None)[1]


def _typed_in(texts: Iterable[tuple[str | None, Any]]) -> set[str]:
    found = set()
    for text, untrusted in texts:
        if untrusted:
            continue  # written from untrusted content (a starter): not typed by the person
        for match in TYPED_URL.findall(text or ""):
            normal = normal_url(match.rstrip(TRAILING))
            if normal:
                found.add(normal)
    return found


def held_for_approval(tool: Tool, arguments: dict[str, Any], typed: set[str]) -> Pause | None:
    """The confirmation card for a call a tainted conversation may not make on its own,
    or None. Every such call is held, a repeat of a declined or dismissed one too."""
    if tool.on_approved is not None:
        return None  # it asks the person itself, with what it will save
    if tool.call_needs_approval(arguments):
        pause = confirmation(arguments, REASON, tool.held_question)
        if tool.held_details is not None:
            pause.card = {**pause.card, **tool.held_details(arguments)}
        return pause
    if tool.fetches_url:
        url = str(arguments.get("url", ""))
        if normal_url(url) not in typed:
            reason = f"{REASON} You did not type this exact address yourself."
            return fetch_confirmation(tool.held_question, arguments, url_view(url), reason)
    return None
