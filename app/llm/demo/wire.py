"""The Messages API wire format as the demo model reads and writes it: the text of a
request's parts, the tool results it carries, content blocks, and token estimates (about
four characters a token)."""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    """What the demo model answers: content blocks and why it stopped."""

    blocks: list[dict[str, Any]]
    stop_reason: str


def _block_chars(block: Any) -> int:
    if isinstance(block, str):
        return len(block)
    if not isinstance(block, dict):
        return 0
    kind = block.get("type")
    if kind == "text":
        return len(str(block.get("text", "")))
    if kind == "thinking":
        return len(str(block.get("thinking", "")))
    if kind == "tool_use":
        return len(json.dumps(block.get("input", {})))
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return sum(_block_chars(b) for b in content)
        return len(str(content or ""))
    return 0


def estimate_input_tokens(body: dict[str, Any]) -> int:
    chars = len(system_text(body.get("system")))
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(_block_chars(b) for b in content)
    if body.get("tools"):
        chars += len(json.dumps(body["tools"]))
    return max(1, math.ceil(chars / 4))


def estimate_output_tokens(blocks: list[dict[str, Any]]) -> int:
    return max(1, math.ceil(sum(_block_chars(b) for b in blocks) / 4))


def system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return ""


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def blocks_of(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


@dataclass
class SeenResult:
    name: str | None
    text: str
    data: Any
    is_error: bool


def tool_results(messages: list[dict[str, Any]]) -> list[SeenResult]:
    """The last message's tool results, each with the name of the tool that was called."""
    names: dict[str, str] = {}
    for message in messages:
        if message.get("role") == "assistant":
            for block in blocks_of(message, "tool_use"):
                names[str(block.get("id"))] = str(block.get("name"))
    results = []
    for block in blocks_of(messages[-1], "tool_result"):
        content = block.get("content")
        if isinstance(content, list):
            text = "\n".join(
                str(b.get("text", ""))
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
        else:
            text = "" if content is None else str(content)
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, ValueError):
            data = None
        results.append(
            SeenResult(
                names.get(str(block.get("tool_use_id"))), text, data, bool(block.get("is_error"))
            )
        )
    return results


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f"toolu_demo_{secrets.token_hex(12)}",
        "name": name,
        "input": arguments,
    }


def say(text: str) -> Reply:
    return Reply([text_block(text)], "end_turn")
