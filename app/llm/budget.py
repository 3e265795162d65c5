"""Token budgeting: what one model call may spend on input, and estimates that err high.

The window holds the input AND the reserved output: available input is the window minus
this step's max_tokens (which includes a thinking budget only when thinking is on for
the step), minus the tool schemas and the system prompt sent with it, minus a margin.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from typing import Any

# Characters per token, on the low side so estimates err high (English runs ~4).
CHARS_PER_TOKEN = 3.0
MESSAGE_OVERHEAD_TOKENS = 8
SAFETY_MARGIN_TOKENS = 1_024
SAFETY_MARGIN_FRACTION = 0.02
TRUNCATION_MARKER = (
    "\n\n[… {hidden} characters not shown here; the full text is saved in the conversation]"
)


def estimate_text(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def block_chars(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return len(block.get("text", ""))
    if kind == "thinking":
        return len(block.get("thinking", ""))
    if kind == "tool_use":
        return len(block.get("name", "")) + len(json.dumps(block.get("input", {})))
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            return sum(block_chars(part) for part in content)
        return len(str(content))
    return len(json.dumps(block))


def estimate_blocks(blocks: list[dict[str, Any]]) -> int:
    return MESSAGE_OVERHEAD_TOKENS + math.ceil(
        sum(block_chars(b) for b in blocks) / CHARS_PER_TOKEN
    )


def estimate_messages(messages: list[dict[str, Any]]) -> int:
    return sum(estimate_blocks(m["content"]) for m in messages)


def estimate_tools(tools: list[dict[str, Any]]) -> int:
    return estimate_text(json.dumps(tools)) if tools else 0


def input_budget(window: int, max_tokens: int, tools_tokens: int, system_tokens: int) -> int:
    margin = SAFETY_MARGIN_TOKENS + int(window * SAFETY_MARGIN_FRACTION)
    return window - max_tokens - tools_tokens - system_tokens - margin


def truncate_text(text: str, max_tokens: int) -> str:
    """Cut text to about max_tokens, saying how much was left out."""
    limit = max(0, int(max_tokens * CHARS_PER_TOKEN) - len(TRUNCATION_MARKER) - 12)
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATION_MARKER.format(hidden=len(text) - limit)


def truncate_block(block: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {**block, "text": truncate_text(block["text"], max_tokens)}
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
        return {**block, "content": truncate_text(str(content), max_tokens)}
    return block


def cap_oversized(messages: list[dict[str, Any]], per_message: int) -> list[dict[str, Any]]:
    """A single message too large for its share of the window (a pasted document, a big
    tool result) is truncated in the request; the row in the database keeps all of it."""
    capped = []
    for message in messages:
        if estimate_blocks(message["content"]) <= per_message:
            capped.append(message)
            continue
        share = max(64, per_message // max(1, len(message["content"])))
        capped.append(
            {**message, "content": [truncate_block(b, share) for b in message["content"]]}
        )
    return capped


class Calibration:
    """Per conversation, how the API's own count compares with our estimate; applied to
    the next estimate so a conversation full of dense text is not under-counted."""

    def __init__(self, size: int = 2048):
        self._ratios: OrderedDict[int, float] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def record(self, conversation_id: int, estimated: int, reported: int) -> None:
        if estimated <= 0 or reported <= 0:
            return
        with self._lock:
            self._ratios[conversation_id] = max(1.0, reported / estimated)
            self._ratios.move_to_end(conversation_id)
            while len(self._ratios) > self._size:
                self._ratios.popitem(last=False)

    def factor(self, conversation_id: int) -> float:
        return self._ratios.get(conversation_id, 1.0)
