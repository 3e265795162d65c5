"""The cards of calls held by the taint gate (app/chat/taint.py), shared with fetch_url,
which holds a cross-host redirect itself."""

from __future__ import annotations

from typing import Any

from app.tools.results import Pause, confirmation
from app.tools.urls import UrlView

REASON = (
    "This conversation has read outside content (a web page or an attachment) that could "
    "contain instructions meant for the assistant. Check that this is something you asked for."
)


def fetch_confirmation(
    question: str, arguments: dict[str, Any], view: UrlView | None, reason: str
) -> Pause:
    """A held fetch, asking `question` (the fetching tool's `held_question`): the card
    names the exact address (the whole URL, its query, and the host as punycode beside
    its Unicode form)."""
    pause = confirmation(arguments, reason, question)
    if view is not None:
        pause.card["url"] = view.as_card()
    return pause
