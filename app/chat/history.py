"""The model's view of a conversation, rebuilt from rows on every model call.

Rows carry their Anthropic content blocks in `meta.blocks`; rows without blocks (agent
output cards, notices, errors) are for people only. Only the tail of the shown branch is
read."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.orm import Session

from app.chat.branches import branch_rows
from app.chat.models import Conversation, Message
from app.chat.shapes import meta_of

DISMISSED = json.dumps({"dismissed": True})
ROWS_PER_MESSAGE = 3  # how many rows to read per message the cap allows


def load_tail(session: Session, conversation: Conversation, cap: int) -> list[Message]:
    """The newest rows of the shown branch after the summary (app/chat/branches.py): the
    model never sees another branch's rows."""
    return branch_rows(
        session,
        conversation,
        above=conversation.summarized_up_to_sequence,
        limit=cap * ROWS_PER_MESSAGE + 10,
    )


def merge_rows(rows: list[Message]) -> list[dict[str, Any]]:
    """Rows with blocks become messages; same-role neighbours merge into one."""
    messages: list[dict[str, Any]] = []
    for row in rows:
        blocks = meta_of(row).get("blocks")
        if not blocks or row.role not in ("user", "assistant"):
            continue
        _append(messages, row.role, blocks)
    return messages


def _append(messages: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].extend(blocks)
    else:
        messages.append({"role": role, "content": list(blocks)})


def _clean_blocks(blocks: list[dict[str, Any]], keep_thinking: bool) -> list[dict[str, Any]]:
    cleaned = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and not str(block.get("text", "")).strip():
            continue  # the API rejects empty text blocks
        if kind in ("thinking", "redacted_thinking") and not keep_thinking:
            continue
        if kind == "tool_result" and block.get("content") in ("", None, []):
            block = {**block, "content": "(no output)"}
        cleaned.append(block)
    return cleaned


def tool_use_ids(message: dict[str, Any]) -> list[str]:
    return [b["id"] for b in message["content"] if b.get("type") == "tool_use"]


def repair(messages: list[dict[str, Any]], keep_thinking: bool) -> list[dict[str, Any]]:
    """Make the history valid for the API whatever happened before: no empty text, every
    tool_use answered right after it (a missing answer, e.g. from a crash, becomes a
    synthetic dismissed result), no orphan tool_result, user message first."""
    cleaned: list[dict[str, Any]] = []
    for message in messages:
        blocks = _clean_blocks(message["content"], keep_thinking)
        if blocks:
            _append(cleaned, message["role"], blocks)
    while cleaned and cleaned[0]["role"] != "user":
        cleaned.pop(0)

    repaired: list[dict[str, Any]] = []
    for index, message in enumerate(cleaned):
        if message["role"] == "assistant":
            repaired.append(message)
            continue
        previous = cleaned[index - 1] if index else None
        expected = tool_use_ids(previous) if previous else []
        results = {
            b["tool_use_id"]: b
            for b in message["content"]
            if b.get("type") == "tool_result" and b["tool_use_id"] in expected
        }
        others = [b for b in message["content"] if b.get("type") != "tool_result"]
        ordered = [
            results.get(tool_id)
            or {"type": "tool_result", "tool_use_id": tool_id, "content": DISMISSED}
            for tool_id in expected
        ]
        blocks = ordered + others
        if blocks:
            repaired.append({"role": "user", "content": blocks})
        # A user message with nothing left drops out; the assistant before it is
        # unanswered then, handled by the trailing check below.
    return _answer_trailing_and_gaps(repaired)


def _answer_trailing_and_gaps(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An assistant tool_use followed by another assistant message, or last of all, gets
    its synthetic answers in a user message of its own."""
    fixed: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        fixed.append(message)
        if message["role"] != "assistant":
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        ids = tool_use_ids(message)
        if ids and (following is None or following["role"] != "user"):
            fixed.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": i, "content": DISMISSED} for i in ids
                    ],
                }
            )
    merged: list[dict[str, Any]] = []
    for message in fixed:
        _append(merged, message["role"], message["content"])
    return merged


def _clean_start(message: dict[str, Any]) -> bool:
    return message["role"] == "user" and not any(
        b.get("type") == "tool_result" for b in message["content"]
    )


def cap_messages(messages: list[dict[str, Any]], cap: int) -> list[dict[str, Any]]:
    """At most `cap` messages, cut at a user message that opens with no tool_result, so a
    tool_result is never separated from its tool_use. When no such cut fits in the cap
    (a tiny cap ending in tool results), the cut moves back to keep the pair whole."""
    start = max(0, len(messages) - cap) if cap > 0 else 0
    for index in range(start, len(messages)):
        if _clean_start(messages[index]):
            return messages[index:]
    for index in range(start - 1, -1, -1):
        if _clean_start(messages[index]):
            return messages[index:]
    return list(messages)


def continuing_tool_loop_without_thinking(messages: list[dict[str, Any]]) -> bool:
    """With thinking on, the assistant turn whose tool results are being sent must start
    with its thinking block; a turn made with thinking off rules thinking out for this step."""
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return False
    last_assistant = messages[-2]
    if not tool_use_ids(last_assistant):
        return False
    first = last_assistant["content"][0]
    return first.get("type") not in ("thinking", "redacted_thinking")
