"""Provenance: what a tainted conversation creates carries the untrusted sources it read.

An output, character, visual asset or campaign created while the conversation's model had
been sent untrusted content records those sources in `untrusted_sources`; the workspace,
settings and admin pages show it as "from untrusted content", and a tool that reads it
later (`ToolContext.saw`) passes the taint on to the reading conversation. Memory facts
record theirs in `UserMemory.untrusted_facts` (fact -> sources)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from app.memory.models import UserMemory

if TYPE_CHECKING:
    from app.tools.context import ToolContext

BADGE = "from untrusted content"


@contextmanager
def stamped(session: Session, context: ToolContext) -> Iterator[None]:
    """While a tool runs, every object the session inserts that can carry provenance
    records the untrusted content known at that moment (whatever tool creates it): the
    conversation's, and what the call itself read (an agent adapting a tainted output)."""

    def before_flush(flushing: Session, _context: object, _instances: object) -> None:
        sources = [*context.untrusted_sources, *context.read_untrusted]
        if not sources:
            return
        for obj in flushing.new:
            if hasattr(type(obj), "untrusted_sources") and not obj.untrusted_sources:
                obj.untrusted_sources = sources

    event.listen(session, "before_flush", before_flush)
    try:
        yield
        session.flush()  # the tool's last objects, before the listener goes
    finally:
        event.remove(session, "before_flush", before_flush)


def source_label(source: dict[str, Any]) -> str:
    """One source in plain words (the badge's tooltip)."""
    if not isinstance(source, dict):
        return "outside content"
    if source.get("url"):
        return f"the web page {source['url']}"
    if source.get("filename"):
        return f"the attached file {source['filename']}"
    if source.get("saved"):
        return f"a saved {str(source['saved']).replace('_', ' ')} made from outside content"
    if source.get("memory"):
        return "a remembered fact made from outside content"
    if "web_search" in source:
        return f"a web search for {str(source['web_search'])!r}"
    if "shared_chat" in source:
        return f"someone else's chat, shared by a link ({str(source['shared_chat'])!r})"
    if source.get("mcp"):
        return f"the MCP server {source['mcp']} (its tool {source.get('tool', '')})"
    return "outside content"


def untrusted_facts(memory: UserMemory | None) -> dict[str, list[dict[str, Any]]]:
    """The person's current facts that came from untrusted content, with their sources."""
    if memory is None or not memory.untrusted_facts:
        return {}
    facts = set(memory.facts or [])
    return {fact: sources for fact, sources in memory.untrusted_facts.items() if fact in facts}
