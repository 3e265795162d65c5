"""What a tool hands back: a result, a failure the model reads, or a card that pauses the
run. Both the registry (the declarations) and the context (what a handler is given) use
these, so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.kinds import CardKind
from app.row_meta import AskedCard, ShownRow


class ToolFailure(Exception):
    """A failure the model should see as an `is_error` tool result (never crashes a run)."""


@dataclass
class ToolResult:
    content: Any
    is_error: bool = False
    # Rows the tool wants shown in the chat besides its (hidden) result, e.g. an image.
    visible_rows: list[ShownRow] = field(default_factory=list)
    # What untrusted content this result carries (a page, a file, a saved output made from
    # one): each a small dict such as {"tool": "fetch_url", "url": ...}. The loop records
    # them on the result row; from then on the conversation is tainted (app/chat/taint.py).
    untrusted_sources: list[dict[str, Any]] = field(default_factory=list)
    # The call never reached its handler: no such tool, its input or the role refused.
    refused: bool = False


def refusal(content: str) -> ToolResult:
    """The error result of a call that never reached its handler."""
    return ToolResult(content, is_error=True, refused=True)


@dataclass
class Pause:
    """A UI tool's answer: stop the run and show this card until the person answers."""

    card: AskedCard


def confirmation(arguments: dict[str, Any], reason: str, title: str) -> Pause:
    """Hold a call until the person approves exactly these arguments."""
    return Pause(
        {
            "kind": CardKind.CONFIRMATION,
            "title": title,
            "arguments": arguments,
            "reason": reason,
            "steps": [],
        }
    )
