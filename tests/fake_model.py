"""A fake Anthropic Messages API server for tests.

Real HTTP on 127.0.0.1 (ephemeral port) served from a background thread, speaking the
Messages API wire format (JSON and ``text/event-stream``) closely enough that the real
``anthropic`` SDK talks to it unmodified.  Requests are validated strictly, like the real
API, and answered from a script of turns::

    server = FakeModelServer().start()
    server.script(
        Turn(text("Hello there")),
        Turn(text("Let me look."), tool_use("list_offers", {})),
        api_error(529, "overloaded_error", "Overloaded"),
        Turn(text("partial "), stream_error("overloaded_error")),
    )
    client = anthropic.Anthropic(api_key="test", base_url=server.base_url)

Load it as a pytest plugin (``pytest_plugins = ["tests.fake_model"]``) for the
``fake_model`` fixture.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import http.server
import json
import math
import re
import secrets
import socket
import socketserver
import string
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "NO_REPLY_TEXT",
    "ApiError",
    "FakeModelServer",
    "RecordedRequest",
    "Rejection",
    "StreamError",
    "TextBlock",
    "ThinkingBlock",
    "RedactedThinkingBlock",
    "ToolUseBlock",
    "Turn",
    "api_error",
    "count_request_tokens",
    "fake_model",
    "redacted_thinking",
    "stream_error",
    "text",
    "thinking",
    "tool_use",
    "validate_request",
]

DEFAULT_CONTEXT_WINDOW = 200_000
NO_REPLY_TEXT = "(fake model: no scripted reply)"

_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
_STATUS_ERROR = {status: kind for kind, status in _ERROR_STATUS.items()}
_DEFAULT_ERROR_MESSAGE = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
    "permission_error": "Permission denied",
    "not_found_error": "Not found",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit",
    "api_error": "Internal server error",
    "overloaded_error": "Overloaded",
}
_STOP_REASONS = frozenset(
    {"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"}
)
_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _rand(n: int = 24) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(n))


# --------------------------------------------------------------------------------------
# Scripting DSL
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextBlock:
    text: str


@dataclass(frozen=True)
class ToolUseBlock:
    name: str
    input: dict[str, Any]
    id: str | None = None  # None: a fresh ``toolu_...`` id is generated per reply


@dataclass(frozen=True)
class ThinkingBlock:
    thinking: str


@dataclass(frozen=True)
class RedactedThinkingBlock:
    pass


@dataclass(frozen=True)
class StreamError:
    """Ends a streamed reply with an SSE ``event: error`` (must be a Turn's last item)."""

    error_type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass(frozen=True)
class ApiError:
    """A script entry that answers the whole call with an HTTP error status."""

    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def body(self, request_id: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "error",
            "error": {"type": self.error_type, "message": self.message},
        }
        if request_id:
            out["request_id"] = request_id
        return out


Block = TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock


def text(value: str) -> TextBlock:
    """A text content block, streamed as several ``text_delta`` chunks."""
    return TextBlock(value)


def tool_use(
    name: str, input: dict[str, Any] | None = None, *, id: str | None = None
) -> ToolUseBlock:
    """A tool_use block; its input is streamed as 2+ ``input_json_delta`` chunks."""
    return ToolUseBlock(name, dict(input or {}), id)


def thinking(value: str) -> ThinkingBlock:
    """A thinking block: ``thinking_delta`` chunks then a server-signed ``signature_delta``."""
    return ThinkingBlock(value)


def redacted_thinking() -> RedactedThinkingBlock:
    """A redacted_thinking block whose opaque ``data`` is issued (and later accepted) by the server."""
    return RedactedThinkingBlock()


def stream_error(error_type: str = "overloaded_error", message: str | None = None) -> StreamError:
    return StreamError(error_type, message or _DEFAULT_ERROR_MESSAGE.get(error_type, error_type))


def api_error(
    status: int,
    error_type: str | None = None,
    message: str | None = None,
    *,
    retry_after: float | str | None = None,
    headers: dict[str, str] | None = None,
) -> ApiError:
    """An HTTP error reply, e.g. ``api_error(529, "overloaded_error", "Overloaded")``.

    ``retry_after`` sets the ``retry-after`` header (seconds).  Note the SDK ignores a
    value of ``0`` and falls back to its own backoff (~0.4-0.5 s); use e.g. ``0.01``.
    """
    kind = error_type or _STATUS_ERROR.get(status, "api_error")
    hdrs = {k.lower(): str(v) for k, v in (headers or {}).items()}
    if retry_after is not None:
        hdrs["retry-after"] = str(retry_after)
    return ApiError(status, kind, message or _DEFAULT_ERROR_MESSAGE.get(kind, kind), hdrs)


class Turn:
    """One scripted model reply.

    Items are content blocks (``text`` / ``tool_use`` / ``thinking`` / ``redacted_thinking``;
    a bare ``str`` means ``text(str)``), optionally ending with a ``stream_error``.

    Options: ``stop_reason`` (default ``tool_use`` if the turn has a tool_use block, else
    ``end_turn``); ``delay_first`` seconds between the response headers and the first
    event; ``token_delay`` seconds between consecutive deltas; ``stall_after=N`` hangs
    silently (no pings) for ``stall_seconds`` after the N-th delta has been sent.
    """

    def __init__(
        self,
        *items: Block | StreamError | str,
        stop_reason: str | None = None,
        delay_first: float = 0.0,
        token_delay: float = 0.0,
        stall_after: int | None = None,
        stall_seconds: float = 30.0,
    ) -> None:
        blocks: list[Block] = []
        error: StreamError | None = None
        for n, item in enumerate(items):
            if isinstance(item, str):
                item = TextBlock(item)
            if isinstance(item, StreamError):
                if n != len(items) - 1:
                    raise ValueError("stream_error(...) must be the last item of a Turn")
                error = item
            elif isinstance(item, TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock):
                blocks.append(item)
            else:
                raise TypeError(f"not a Turn item: {item!r}")
        if stop_reason is not None and stop_reason not in _STOP_REASONS:
            raise ValueError(f"unknown stop_reason {stop_reason!r}")
        if stall_after is not None and stall_after < 0:
            raise ValueError("stall_after must be >= 0")
        self.blocks = tuple(blocks)
        self.error = error
        self.stop_reason = stop_reason or (
            "tool_use" if any(isinstance(b, ToolUseBlock) for b in blocks) else "end_turn"
        )
        self.delay_first = delay_first
        self.token_delay = token_delay
        self.stall_after = stall_after
        self.stall_seconds = stall_seconds

    def __repr__(self) -> str:
        items = [*map(repr, self.blocks), *([repr(self.error)] if self.error else [])]
        return f"Turn({', '.join(items)}, stop_reason={self.stop_reason!r})"


ScriptEntry = Turn | ApiError


# --------------------------------------------------------------------------------------
# Token counting and validation
# --------------------------------------------------------------------------------------


def _text_of_blocks(blocks: Any) -> int:
    if isinstance(blocks, str):
        return len(blocks)
    total = 0
    if isinstance(blocks, list):
        for b in blocks:
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                total += len(b["text"])
    return total


def count_request_tokens(body: dict[str, Any]) -> int:
    """The server's own token count of a request: ceil(total_chars / 4).

    Counts the system prompt text, every message's text / thinking / tool_use input
    (``json.dumps``) / tool_result content text, and ``json.dumps(tools)``.
    Tolerates malformed bodies (unknown parts count as 0).
    """
    total = _text_of_blocks(body.get("system"))
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            total += len(content)
            continue
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                total += len(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                total += len(block["thinking"])
            elif kind == "tool_use" and "input" in block:
                total += len(json.dumps(block["input"]))
            elif kind == "tool_result":
                total += _text_of_blocks(block.get("content"))
    if body.get("tools"):
        total += len(json.dumps(body["tools"]))
    return math.ceil(total / 4)


class _Invalid(Exception):
    pass


_TOP_LEVEL_FIELDS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "stream",
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "metadata",
        "tools",
        "tool_choice",
        "thinking",
        "service_tier",
        "cache_control",
        "container",
        "context_management",
        "diagnostics",
        "inference_geo",
        "mcp_servers",
        "output_config",
        "output_format",
        "speed",
    }
)
_USER_BLOCKS = ("text", "image", "document", "search_result", "tool_result", "container_upload")
_ASSISTANT_BLOCKS = (
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
)
_TOOL_RESULT_CONTENT_BLOCKS = ("text", "image", "document", "search_result")
_TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOOL_ID_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tags(names: Iterable[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _check_text_block(block: dict[str, Any], where: str, root: str) -> None:
    value = block.get("text")
    if not isinstance(value, str):
        raise _Invalid(f"{where}.text: Input should be a valid string")
    if not value.strip():
        raise _Invalid(f"{root}: text content blocks must be non-empty")


def validate_request(
    body: Any,
    *,
    issued_signatures: Iterable[str] = (),
    context_window: int = DEFAULT_CONTEXT_WINDOW,
    count_tokens: bool = False,
) -> str | None:
    """Validate a Messages API request body like the real API; the error message or None.

    ``count_tokens=True`` validates a ``/v1/messages/count_tokens`` body (no
    ``max_tokens``, no context-window check).
    """
    try:
        _validate(body, set(issued_signatures), context_window, count_tokens)
    except _Invalid as exc:
        return str(exc)
    return None


def _validate(body: Any, issued: set[str], context_window: int, count_only: bool) -> None:
    if not isinstance(body, dict):
        raise _Invalid("Input should be a valid dictionary")
    allowed = (
        _TOP_LEVEL_FIELDS - {"max_tokens", "stream", "stop_sequences"}
        if count_only
        else _TOP_LEVEL_FIELDS
    )
    for key in body:
        if key not in allowed:
            raise _Invalid(f"{key}: Extra inputs are not permitted")

    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _Invalid(
            "model: Field required" if model is None else "model: Input should be a valid string"
        )

    max_tokens = body.get("max_tokens")
    if not count_only:
        if max_tokens is None:
            raise _Invalid("max_tokens: Field required")
        if not _is_int(max_tokens):
            raise _Invalid("max_tokens: Input should be a valid integer")
        if max_tokens < 1:
            raise _Invalid("max_tokens: Input should be greater than or equal to 1")
        if "stream" in body and not isinstance(body["stream"], bool):
            raise _Invalid("stream: Input should be a valid boolean")

    _validate_system(body.get("system"))
    tool_names = _validate_tools(body.get("tools"))
    choice_type = _validate_tool_choice(body.get("tool_choice"), tool_names, "tools" in body)
    thinking_type = _validate_thinking(body, max_tokens, choice_type, count_only)

    temperature = body.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise _Invalid("temperature: Input should be a valid number")
        if not 0 <= temperature <= 1:
            raise _Invalid("temperature: Input should be less than or equal to 1")
        if thinking_type == "enabled" and temperature != 1:
            raise _Invalid(
                "`temperature` may only be set to 1 when thinking is enabled. "
                f"Please consult our documentation at {_THINKING_DOCS}"
            )

    _validate_messages(body.get("messages"), issued, thinking_type == "enabled")

    if not count_only:
        tokens = count_request_tokens(body)
        if tokens + max_tokens > context_window:
            raise _Invalid(
                f"prompt is too long: {tokens} tokens + {max_tokens} max_tokens "
                f"> {context_window} maximum"
            )


def _validate_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise _Invalid("system: Input should be a valid string or a valid list")
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise _Invalid(f"system.{j}.type: Input should be 'text'")
        _check_text_block(block, f"system.{j}", "system")


def _validate_tools(tools: Any) -> set[str]:
    names: set[str] = set()
    if tools is None:
        return names
    if not isinstance(tools, list):
        raise _Invalid("tools: Input should be a valid list")
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise _Invalid(f"tools.{k}: Input should be a valid dictionary")
        kind = tool.get("type")
        name = tool.get("name")
        if kind in (None, "custom"):
            if not isinstance(name, str) or not _TOOL_NAME_RE.match(name):
                raise _Invalid(
                    f"tools.{k}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                )
            schema = tool.get("input_schema")
            if schema is None:
                raise _Invalid(f"tools.{k}.custom.input_schema: Field required")
            if not isinstance(schema, dict):
                raise _Invalid(f"tools.{k}.custom.input_schema: Input should be a valid dictionary")
            if schema.get("type") != "object":
                raise _Invalid(f"tools.{k}.custom.input_schema.type: Input should be 'object'")
            if "description" in tool and not isinstance(tool["description"], str):
                raise _Invalid(f"tools.{k}.custom.description: Input should be a valid string")
        elif not isinstance(name, str) or not name:
            raise _Invalid(f"tools.{k}.{kind}.name: Field required")
        if name in names:
            raise _Invalid(f"tools: Tool names must be unique. Duplicate name: {name}")
        names.add(name)
    return names


def _validate_tool_choice(choice: Any, tool_names: set[str], has_tools: bool) -> str | None:
    if choice is None:
        return None
    if not isinstance(choice, dict):
        raise _Invalid("tool_choice: Input should be a valid dictionary")
    kind = choice.get("type")
    if kind not in ("auto", "any", "tool", "none"):
        raise _Invalid(
            f"tool_choice: Input tag '{kind}' found using 'type' does not match any of the "
            "expected tags: 'auto', 'any', 'tool', 'none'"
        )
    if "disable_parallel_tool_use" in choice and not isinstance(
        choice["disable_parallel_tool_use"], bool
    ):
        raise _Invalid(
            f"tool_choice.{kind}.disable_parallel_tool_use: Input should be a valid boolean"
        )
    if kind in ("any", "tool") and not has_tools:
        raise _Invalid("tool_choice may only be specified while providing tools.")
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str):
            raise _Invalid("tool_choice.tool.name: Field required")
        if name not in tool_names:
            raise _Invalid(f"tool_choice.tool.name: Tool '{name}' not found in provided tools")
    return kind


def _validate_thinking(
    body: dict[str, Any], max_tokens: Any, choice_type: str | None, count_only: bool
) -> str | None:
    config = body.get("thinking")
    if config is None:
        return None
    if not isinstance(config, dict):
        raise _Invalid("thinking: Input should be a valid dictionary")
    kind = config.get("type")
    if kind not in ("enabled", "disabled", "adaptive"):
        raise _Invalid(
            f"thinking: Input tag '{kind}' found using 'type' does not match any of the "
            "expected tags: 'adaptive', 'disabled', 'enabled'"
        )
    if kind == "enabled":
        budget = config.get("budget_tokens")
        if budget is None:
            raise _Invalid("thinking.enabled.budget_tokens: Field required")
        if not _is_int(budget):
            raise _Invalid("thinking.enabled.budget_tokens: Input should be a valid integer")
        if budget < 1024:
            raise _Invalid(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            )
        if not count_only and budget >= max_tokens:
            raise _Invalid(
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                f"documentation at {_THINKING_DOCS}#max-tokens-and-context-window-size"
            )
    if kind in ("enabled", "adaptive") and choice_type in ("any", "tool"):
        raise _Invalid("Thinking may not be enabled when tool_choice forces tool use.")
    return kind


def _validate_messages(messages: Any, issued: set[str], thinking_enabled: bool) -> None:
    if messages is None:
        raise _Invalid("messages: Field required")
    if not isinstance(messages, list):
        raise _Invalid("messages: Input should be a valid list")
    if not messages:
        raise _Invalid("messages: at least one message is required")

    last = len(messages) - 1
    block_lists: list[list[dict[str, Any]]] = []
    seen_tool_ids: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _Invalid(f"messages.{i}: Input should be a valid dictionary")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise _Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise _Invalid('messages: first message must use the "user" role')
        for key in message:
            if key not in ("role", "content"):
                raise _Invalid(f"messages.{i}.{key}: Extra inputs are not permitted")
        if "content" not in message:
            raise _Invalid(f"messages.{i}.content: Field required")
        content = message["content"]
        final_assistant = i == last and role == "assistant"
        nonempty_msg = (
            f"messages.{i}: all messages must have non-empty content except for the "
            "optional final assistant message"
        )
        if isinstance(content, str):
            if not content.strip() and not final_assistant:
                raise _Invalid(nonempty_msg)
            blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
        elif isinstance(content, list):
            if not content and not final_assistant:
                raise _Invalid(nonempty_msg)
            blocks = content
            for j, block in enumerate(blocks):
                _validate_block(block, i, j, role, issued, seen_tool_ids)
        else:
            raise _Invalid(f"messages.{i}.content: Input should be a valid string or a valid list")
        if final_assistant and blocks:
            tail = blocks[-1]
            if tail.get("type") == "text" and tail.get("text", "") != tail.get("text", "").rstrip():
                raise _Invalid(
                    "messages: final assistant content cannot end with trailing whitespace"
                )
        block_lists.append(blocks)

    for i in range(len(block_lists)):
        role = messages[i]["role"]
        if role == "assistant":
            _check_tool_results_follow(messages, block_lists, i)
        else:
            _check_tool_results_preceded(messages, block_lists, i)

    if thinking_enabled:
        assistant_idx = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        if assistant_idx:
            i = assistant_idx[-1]
            blocks = block_lists[i]
            if any(b.get("type") == "tool_use" for b in blocks):
                first = blocks[0].get("type")
                if first not in ("thinking", "redacted_thinking"):
                    raise _Invalid(
                        f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                        f"but found `{first}`. When `thinking` is enabled, a final `assistant` "
                        "message must start with a thinking block (preceeding the lastmost set of "
                        "`tool_use` and `tool_result` blocks). We recommend you include thinking "
                        "blocks from previous turns. To avoid this requirement, disable `thinking`. "
                        f"Please consult our documentation at {_THINKING_DOCS}"
                    )


def _validate_block(
    block: Any, i: int, j: int, role: str, issued: set[str], seen_tool_ids: set[str]
) -> None:
    where = f"messages.{i}.content.{j}"
    if not isinstance(block, dict):
        raise _Invalid(f"{where}: Input should be a valid dictionary")
    kind = block.get("type")
    allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
    if kind is None:
        raise _Invalid(f"{where}.type: Field required")
    if kind not in allowed:
        raise _Invalid(
            f"{where}: Input tag '{kind}' found using 'type' does not match any of the expected "
            f"tags for a `{role}` message: {_tags(allowed)}"
        )
    if kind == "text":
        _check_text_block(block, where, "messages")
    elif kind == "tool_use":
        tool_id = block.get("id")
        if not isinstance(tool_id, str) or not _TOOL_ID_RE.match(tool_id):
            raise _Invalid(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
        if not isinstance(block.get("name"), str) or not block["name"]:
            raise _Invalid(f"{where}.name: Field required")
        if not isinstance(block.get("input"), dict):
            raise _Invalid(f"{where}.input: Input should be a valid dictionary")
        if tool_id in seen_tool_ids:
            raise _Invalid(f"{where}: `tool_use` ids must be unique. Duplicate id: {tool_id}")
        seen_tool_ids.add(tool_id)
    elif kind == "tool_result":
        if not isinstance(block.get("tool_use_id"), str):
            raise _Invalid(f"{where}.tool_use_id: Field required")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            raise _Invalid(f"{where}.is_error: Input should be a valid boolean")
        content = block.get("content")
        if content is not None and not isinstance(content, str):
            if not isinstance(content, list):
                raise _Invalid(f"{where}.content: Input should be a valid string or a valid list")
            for k, inner in enumerate(content):
                inner_where = f"{where}.content.{k}"
                if (
                    not isinstance(inner, dict)
                    or inner.get("type") not in _TOOL_RESULT_CONTENT_BLOCKS
                ):
                    raise _Invalid(
                        f"{inner_where}.type: Input should be {_tags(_TOOL_RESULT_CONTENT_BLOCKS)}"
                    )
                if inner["type"] == "text":
                    _check_text_block(inner, inner_where, "messages")
    elif kind == "thinking":
        if not isinstance(block.get("thinking"), str):
            raise _Invalid(f"{where}.thinking: Field required")
        signature = block.get("signature")
        if not isinstance(signature, str):
            raise _Invalid(f"{where}.signature: Field required")
        if signature not in issued:
            raise _Invalid(f"{where}: Invalid `signature` in `thinking` block")
    elif kind == "redacted_thinking":
        data = block.get("data")
        if not isinstance(data, str):
            raise _Invalid(f"{where}.data: Field required")
        if data not in issued:
            raise _Invalid(f"{where}: Invalid `data` in `redacted_thinking` block")
    elif kind in ("image", "document") and not isinstance(block.get("source"), dict):
        raise _Invalid(f"{where}.source: Field required")


def _check_tool_results_follow(
    messages: list[dict[str, Any]], block_lists: list[list[dict[str, Any]]], i: int
) -> None:
    ids = [b["id"] for b in block_lists[i] if b.get("type") == "tool_use"]
    if not ids:
        return
    nxt = i + 1
    results: list[str] = []
    if nxt < len(messages) and messages[nxt]["role"] == "user":
        results = [b["tool_use_id"] for b in block_lists[nxt] if b.get("type") == "tool_result"]
    missing = [tid for tid in ids if tid not in results]
    if missing:
        raise _Invalid(
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message."
        )


def _check_tool_results_preceded(
    messages: list[dict[str, Any]], block_lists: list[list[dict[str, Any]]], i: int
) -> None:
    blocks = block_lists[i]
    if not any(b.get("type") == "tool_result" for b in blocks):
        return
    prev_ids: set[str] = set()
    if i > 0 and messages[i - 1]["role"] == "assistant":
        prev_ids = {b["id"] for b in block_lists[i - 1] if b.get("type") == "tool_use"}
    seen: set[str] = set()
    other_seen = False
    for j, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            other_seen = True
            continue
        tid = block["tool_use_id"]
        if tid not in prev_ids:
            raise _Invalid(
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {tid}. Each `tool_result` block must have a corresponding `tool_use` "
                "block in the previous message."
            )
        if other_seen:
            raise _Invalid(
                f"messages.{i}.content.{j}: `tool_result` blocks must come first in the user "
                "message, before any other content (tool_use ids were found without "
                "`tool_result` blocks immediately after)."
            )
        if tid in seen:
            raise _Invalid(
                f"messages.{i}: each tool_use must have a single result. Found multiple "
                f"`tool_result` blocks with id: {tid}"
            )
        seen.add(tid)


# --------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------


class RecordedRequest(dict):
    """A received request body (a plain dict), plus ``.path``, ``.headers`` (lower-cased),
    ``.error`` (the validation message if rejected, else None) and ``.reply`` (the script
    entry that answered it, or None if rejected)."""

    def __init__(self, body: dict[str, Any], path: str, headers: dict[str, str]) -> None:
        super().__init__(body)
        self.path = path
        self.headers = headers
        self.error: str | None = None
        self.reply: ScriptEntry | None = None


class Rejection(str):
    """A validation error message (a ``str``) with the offending ``.body`` and ``.path``."""

    body: Any
    path: str

    def __new__(cls, message: str, body: Any, path: str) -> Rejection:
        obj = super().__new__(cls, message)
        obj.body = body
        obj.path = path
        return obj


# --------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------


def _split_text(value: str) -> list[str]:
    """Word-ish pieces (long words split further); always 2+ pieces when len > 1."""
    pieces: list[str] = []
    for word in re.findall(r"\S+\s*|\s+", value):
        while len(word) > 8:
            pieces.append(word[:6])
            word = word[6:]
        if word:
            pieces.append(word)
    if len(pieces) == 1 and len(value) > 1:
        half = len(value) // 2
        pieces = [value[:half], value[half:]]
    return pieces


def _split_json(value: str) -> list[str]:
    n = max(2, min(4, len(value) // 6))
    size = max(1, math.ceil(len(value) / n))
    return [value[k : k + size] for k in range(0, len(value), size)]


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    fake: FakeModelServer

    def server_bind(self) -> None:
        # Skip HTTPServer.server_bind's getfqdn() (a reverse DNS lookup).
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = port

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Client hang-ups and stop() are normal here; anything else shows on stderr.
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError | ValueError) or self.fake._stopping.is_set():
            return
        super().handle_error(request, client_address)


class _Abort(Exception):
    """The client went away or the server is stopping."""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    server_version = "FakeAnthropic/1.0"

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing ---------------------------------------------------------------------

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error(
        self, status: int, kind: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        request_id = headers.get("request-id") if headers else None
        body = ApiError(status, kind, message).body(request_id)
        self._send_json(status, body, headers)

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            self.close_connection = True
            return b""
        return self.rfile.read(int(length))

    def do_GET(self) -> None:
        self._read_body()
        self._send_error(404, "not_found_error", f"Not found: {self.command} {self.path}")

    do_PUT = do_DELETE = do_PATCH = do_GET

    def do_POST(self) -> None:
        fake = self.server.fake
        path = urlsplit(self.path).path
        raw = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        request_id = f"req_{_rand()}"
        base_headers = {"request-id": request_id}
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            self._send_error(404, "not_found_error", f"Not found: POST {path}", base_headers)
            return
        try:
            body = json.loads(raw)
        except ValueError:
            msg = "There was an error parsing the body: invalid JSON"
            fake._record_rejection(Rejection(msg, raw, path))
            self._send_error(400, "invalid_request_error", msg, base_headers)
            return
        count_only = path.endswith("/count_tokens")
        record = RecordedRequest(body if isinstance(body, dict) else {}, path, headers)
        if count_only:
            fake._append(fake.count_tokens_requests, record)
        else:
            fake._append(fake.requests, record)

        if not headers.get("x-api-key") and not headers.get("authorization"):
            record.error = "authentication required: send an x-api-key or Authorization header"
            self._send_error(401, "authentication_error", record.error, base_headers)
            return
        error = validate_request(
            body,
            issued_signatures=fake._issued_snapshot(),
            context_window=fake.context_window,
            count_tokens=count_only,
        )
        if error is not None:
            record.error = error
            fake._record_rejection(Rejection(error, body, path))
            self._send_error(400, "invalid_request_error", error, base_headers)
            return
        input_tokens = count_request_tokens(body)
        if count_only:
            self._send_json(200, {"input_tokens": input_tokens}, base_headers)
            return

        entry = fake._next_entry(body)
        record.reply = entry
        if isinstance(entry, ApiError):
            self._send_error(
                entry.status, entry.error_type, entry.message, {**base_headers, **entry.headers}
            )
            return
        try:
            if body.get("stream"):
                self._stream_turn(entry, body, input_tokens, base_headers)
            else:
                self._reply_turn(entry, body, input_tokens, base_headers)
        except (_Abort, OSError):
            self.close_connection = True

    # -- replies ----------------------------------------------------------------------

    def _materialize(self, turn: Turn) -> list[dict[str, Any]]:
        fake = self.server.fake
        out: list[dict[str, Any]] = []
        for block in turn.blocks:
            if isinstance(block, TextBlock):
                out.append({"type": "text", "text": block.text})
            elif isinstance(block, ToolUseBlock):
                out.append(
                    {
                        "type": "tool_use",
                        "id": block.id or f"toolu_{_rand()}",
                        "name": block.name,
                        "input": block.input,
                    }
                )
            elif isinstance(block, ThinkingBlock):
                out.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": fake._issue()}
                )
            else:
                out.append({"type": "redacted_thinking", "data": fake._issue()})
        return out

    @staticmethod
    def _output_tokens(blocks: list[dict[str, Any]]) -> int:
        chars = 0
        for b in blocks:
            if b["type"] == "text":
                chars += len(b["text"])
            elif b["type"] == "thinking":
                chars += len(b["thinking"])
            elif b["type"] == "tool_use":
                chars += len(json.dumps(b["input"]))
        return max(1, math.ceil(chars / 4))

    def _message(
        self, body: dict[str, Any], content: list[dict[str, Any]], input_tokens: int, output: int
    ) -> dict[str, Any]:
        return {
            "id": f"msg_{_rand()}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": output,
            },
        }

    def _wait(self, seconds: float) -> None:
        if seconds > 0 and self.server.fake._stopping.wait(seconds):
            raise _Abort

    def _reply_turn(
        self, turn: Turn, body: dict[str, Any], input_tokens: int, headers: dict[str, str]
    ) -> None:
        self._wait(turn.delay_first)
        if turn.error is not None:
            err = turn.error
            status = _ERROR_STATUS.get(err.error_type, 500)
            self._send_error(status, err.error_type, err.message, headers)
            return
        blocks = self._materialize(turn)
        message = self._message(body, blocks, input_tokens, self._output_tokens(blocks))
        message["stop_reason"] = turn.stop_reason
        self.server.fake._append(self.server.fake.replies, message)
        self._send_json(200, message, headers)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        if self.server.fake._stopping.is_set():
            raise _Abort
        self._chunk(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())

    def _stream_turn(
        self, turn: Turn, body: dict[str, Any], input_tokens: int, headers: dict[str, str]
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.flush()

        self._wait(turn.delay_first)
        blocks = self._materialize(turn)
        final = self._message(body, blocks, input_tokens, self._output_tokens(blocks))
        start = {**final, "content": [], "usage": {**final["usage"], "output_tokens": 1}}
        self._event("message_start", {"type": "message_start", "message": start})
        self._event("ping", {"type": "ping"})

        sent = 0
        stalled = False

        def delta(index: int, payload: dict[str, Any]) -> None:
            nonlocal sent, stalled
            if turn.stall_after is not None and not stalled and sent >= turn.stall_after:
                stalled = True
                self._wait(turn.stall_seconds)
            elif sent:
                self._wait(turn.token_delay)
            self._event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": payload},
            )
            sent += 1

        for index, block in enumerate(blocks):
            kind = block["type"]
            if kind == "text":
                start_block: dict[str, Any] = {"type": "text", "text": ""}
            elif kind == "tool_use":
                start_block = {**block, "input": {}}
            elif kind == "thinking":
                start_block = {"type": "thinking", "thinking": "", "signature": ""}
            else:
                start_block = block
            self._event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start_block},
            )
            if kind == "text":
                for piece in _split_text(block["text"]):
                    delta(index, {"type": "text_delta", "text": piece})
            elif kind == "tool_use":
                for piece in _split_json(json.dumps(block["input"], ensure_ascii=False)):
                    delta(index, {"type": "input_json_delta", "partial_json": piece})
            elif kind == "thinking":
                for piece in _split_text(block["thinking"]):
                    delta(index, {"type": "thinking_delta", "thinking": piece})
                delta(index, {"type": "signature_delta", "signature": block["signature"]})
            self._event("content_block_stop", {"type": "content_block_stop", "index": index})

        if turn.stall_after is not None and not stalled:
            self._wait(turn.stall_seconds)
        if turn.error is not None:
            err = turn.error
            self._event(
                "error",
                {"type": "error", "error": {"type": err.error_type, "message": err.message}},
            )
            self._chunk(b"")
            self.close_connection = True
            return

        final["stop_reason"] = turn.stop_reason
        self.server.fake._append(self.server.fake.replies, final)
        self._event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": turn.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": final["usage"]["output_tokens"]},
            },
        )
        self._event("message_stop", {"type": "message_stop"})
        self._chunk(b"")


class FakeModelServer:
    """A scripted fake of the Anthropic Messages API on ``127.0.0.1:<ephemeral port>``.

    Attributes: ``base_url``; ``requests`` (every parsed POST /v1/messages body in order,
    as :class:`RecordedRequest` dicts, rejected ones included, with ``.error``);
    ``rejections`` (validation errors as :class:`Rejection` strings, count_tokens ones
    included); ``count_tokens_requests``; ``replies`` (the full message dicts served);
    ``issued_signatures``; ``context_window``; ``responder`` (``callable(body) -> Turn |
    ApiError`` used when the script is empty).
    """

    def __init__(self, *, context_window: int = DEFAULT_CONTEXT_WINDOW) -> None:
        self.context_window = context_window
        self.responder: Callable[[dict[str, Any]], ScriptEntry] | None = None
        self.requests: list[RecordedRequest] = []
        self.rejections: list[Rejection] = []
        self.count_tokens_requests: list[RecordedRequest] = []
        self.replies: list[dict[str, Any]] = []
        self.issued_signatures: set[str] = set()
        self._queue: collections.deque[ScriptEntry] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> FakeModelServer:
        if self._httpd is not None:
            raise RuntimeError("already started")
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.fake = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- scripting --------------------------------------------------------------------

    def script(self, *entries: ScriptEntry | str) -> FakeModelServer:
        """Queue replies, consumed one per accepted POST /v1/messages (a str means a text turn)."""
        converted: list[ScriptEntry] = []
        for entry in entries:
            if isinstance(entry, str):
                entry = Turn(text(entry))
            if not isinstance(entry, Turn | ApiError):
                raise TypeError(f"script entries must be Turn or api_error(...), got {entry!r}")
            converted.append(entry)
        with self._lock:
            self._queue.extend(converted)
        return self

    @property
    def pending(self) -> int:
        """How many scripted entries have not been consumed yet."""
        with self._lock:
            return len(self._queue)

    def clear_script(self) -> None:
        with self._lock:
            self._queue.clear()

    @property
    def last_request(self) -> RecordedRequest:
        with self._lock:
            return self.requests[-1]

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least ``n`` /v1/messages requests were received."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if len(self.requests) >= n:
                    return list(self.requests)
            if time.monotonic() > deadline:
                raise TimeoutError(f"expected {n} requests, got {len(self.requests)}")
            time.sleep(0.01)

    # -- internals used by the handler --------------------------------------------------

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _append(self, target: list[Any], item: Any) -> None:
        with self._lock:
            target.append(item)

    def _record_rejection(self, rejection: Rejection) -> None:
        self._append(self.rejections, rejection)

    def _issue(self) -> str:
        signature = base64.b64encode(secrets.token_bytes(48)).decode()
        with self._lock:
            self.issued_signatures.add(signature)
        return signature

    def _issued_snapshot(self) -> set[str]:
        with self._lock:
            return set(self.issued_signatures)

    def _next_entry(self, body: dict[str, Any]) -> ScriptEntry:
        with self._lock:
            entry = self._queue.popleft() if self._queue else None
        if entry is not None:
            return entry
        responder = self.responder
        if responder is not None:
            try:
                entry = responder(body)
            except Exception as exc:  # surfaced to the client as a 500
                return api_error(500, "api_error", f"fake model responder failed: {exc!r}")
            if isinstance(entry, str):
                entry = Turn(text(entry))
            if not isinstance(entry, Turn | ApiError):
                return api_error(500, "api_error", f"responder returned {entry!r}")
            return entry
        return Turn(text(NO_REPLY_TEXT))


@pytest.fixture
def fake_model() -> Iterator[FakeModelServer]:
    """A started :class:`FakeModelServer`, stopped after the test."""
    server = FakeModelServer()
    server.start()
    yield server
    server.stop()
