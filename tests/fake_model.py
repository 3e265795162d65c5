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

``FakeModelServer(strict=True)`` (or ``server.strict = True``) answers forced tool calls and
requests for JSON itself, as a model that knows only what the request says would: a
:func:`schema_instance` of the tool's ``input_schema``, or a prose-wrapped guess.

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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.waiting import eventually

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
    "model_info",
    "redacted_thinking",
    "schema_instance",
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
class CitedTextBlock:
    """A text block citing web search results: ``citations_delta`` events after its text."""

    text: str
    citations: tuple[tuple[str, str, str], ...]  # (url, title, cited_text)


@dataclass(frozen=True)
class WebSearchBlock:
    """The provider's web search, run within the reply: a ``server_tool_use`` block and its
    ``web_search_tool_result`` (results: (url, title) pairs; the page text is encrypted)."""

    query: str
    results: tuple[tuple[str, str], ...]


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


Block = (
    TextBlock
    | ToolUseBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | CitedTextBlock
    | WebSearchBlock
)


def text(value: str) -> TextBlock:
    """A text content block, streamed as several ``text_delta`` chunks."""
    return TextBlock(value)


def tool_use(
    name: str, input: dict[str, Any] | None = None, *, id: str | None = None
) -> ToolUseBlock:
    """A tool_use block; its input is streamed as 2+ ``input_json_delta`` chunks."""
    return ToolUseBlock(name, dict(input or {}), id)


def web_search(query: str, *results: tuple[str, str]) -> WebSearchBlock:
    """The provider's web search within a reply (answered only when the request offers the
    ``web_search`` server tool, as the real API does)."""
    return WebSearchBlock(query, tuple(results))


def cited(value: str, *citations: tuple[str, str, str]) -> CitedTextBlock:
    """Text with citations of web search results: ``(url, title, cited_text)`` each."""
    return CitedTextBlock(value, tuple(citations))


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
            elif isinstance(item, Block):
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
        for citation in block.get("citations") or []:
            if citation.get("encrypted_index") not in issued:
                raise _Invalid(f"{where}.citations: Invalid `encrypted_index` in a citation")
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
    elif kind == "server_tool_use":
        if (
            not str(block.get("id", "")).startswith("srvtoolu_")
            or block.get("name") != "web_search"
        ):
            raise _Invalid(f"{where}.id: a server tool use the server issued is required")
        if not isinstance(block.get("input"), dict):
            raise _Invalid(f"{where}.input: Input should be a valid dictionary")
    elif kind == "web_search_tool_result":
        content = block.get("content")
        if not str(block.get("tool_use_id", "")).startswith("srvtoolu_"):
            raise _Invalid(f"{where}.tool_use_id: Field required")
        results = content if isinstance(content, list) else []
        if any(result.get("encrypted_content") not in issued for result in results):
            raise _Invalid(f"{where}.content: Invalid `encrypted_content` in a search result")
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
# Strict mode: schema instances and plausible guesses
# --------------------------------------------------------------------------------------

_INF = math.inf
_WORD_CHARS = string.ascii_lowercase + string.ascii_uppercase + string.digits + "_"
_PRINTABLE = string.ascii_lowercase + string.ascii_uppercase + string.digits + " -_.,:;/#@!?"
_ESCAPE_SETS = {
    "d": string.digits,
    "w": _WORD_CHARS,
    "s": " ",
    "D": string.ascii_lowercase,
    "W": " -.,",
    "S": string.ascii_lowercase,
}
_CHAR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}
# What a negated class picks from: readable characters first.
_SET_ALPHABET = "".join(dict.fromkeys(_PRINTABLE + string.printable))


class _Pattern:
    """A small generator for the regexes JSON Schemas use (``pattern``).

    Parses literal chars, escapes (``\\d \\w \\s \\D \\W \\S``, ``\\n``, ``\\uXXXX``, escaped
    punctuation), classes (``[0-9a-fA-F]``, ``[^...]``), ``.``, groups (``(...)``,
    ``(?:...)``, named), quantifiers (``{n}``, ``{n,}``, ``{n,m}``, ``?``, ``+``, ``*``, lazy
    forms), alternation (first branch) and anchors.  Lookarounds and backreferences raise
    ValueError; ``\\b``/``\\B`` generate nothing (the caller verifies the result).
    """

    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.pos = 0
        self.tree = self._alternation()
        if self.pos != len(self.src):
            raise self._error("unbalanced ')'")

    def _error(self, what: str) -> ValueError:
        return ValueError(f"pattern {self.src!r}: {what} (at {self.pos})")

    def _peek(self) -> str:
        return self.src[self.pos] if self.pos < len(self.src) else ""

    def _alternation(self) -> tuple[Any, ...]:
        branches = [self._sequence()]
        while self._peek() == "|":
            self.pos += 1
            branches.append(self._sequence())
        return ("alt", branches)

    def _sequence(self) -> tuple[Any, ...]:
        items: list[tuple[Any, ...]] = []
        while self._peek() not in ("", "|", ")"):
            atom = self._atom()
            lo_hi = self._quantifier()
            if lo_hi is not None:
                if atom[0] == "empty":
                    raise self._error("nothing to repeat")
                atom = ("rep", atom, *lo_hi)
            items.append(atom)
        return ("seq", items)

    def _quantifier(self) -> tuple[int, float] | None:
        ch = self._peek()
        found: tuple[int, float] | None = None
        if ch in ("?", "*", "+"):
            self.pos += 1
            found = {"?": (0, 1), "*": (0, _INF), "+": (1, _INF)}[ch]
        elif ch == "{":
            match = re.compile(r"\{(\d+)(?:(,)(\d*))?\}").match(self.src, self.pos)
            if match is None:
                return None  # a literal "{"
            self.pos = match.end()
            lo = int(match.group(1))
            hi: float = lo
            if match.group(2):
                hi = int(match.group(3)) if match.group(3) else _INF
            if hi < lo:
                raise self._error("quantifier max below min")
            found = (lo, hi)
        if found is not None and self._peek() in ("?", "+"):
            self.pos += 1  # lazy / possessive: same strings
        return found

    def _atom(self) -> tuple[Any, ...]:
        ch = self._peek()
        self.pos += 1
        if ch == "(":
            if self.src.startswith("?:", self.pos):
                self.pos += 2
            elif self.src.startswith("?P<", self.pos) or (
                self.src.startswith("?<", self.pos)
                and self.src[self.pos + 2 : self.pos + 3] not in ("=", "!", "")
            ):
                end = self.src.find(">", self.pos)
                if end < 0:
                    raise self._error("unterminated group name")
                self.pos = end + 1
            elif self._peek() == "?":
                raise self._error("lookarounds and inline flags are not supported")
            inner = self._alternation()
            if self._peek() != ")":
                raise self._error("missing ')'")
            self.pos += 1
            return inner
        if ch == "[":
            return self._class()
        if ch == ".":
            return ("set", string.ascii_lowercase)
        if ch in ("^", "$"):
            return ("empty",)
        if ch == "\\":
            return self._escape(in_class=False)
        if ch in ("*", "+", "?"):
            raise self._error("nothing to repeat")
        return ("lit", ch)

    def _escape(self, *, in_class: bool) -> tuple[Any, ...]:
        ch = self._peek()
        if not ch:
            raise self._error("trailing backslash")
        self.pos += 1
        if ch in _ESCAPE_SETS:
            return ("set", _ESCAPE_SETS[ch])
        if ch in _CHAR_ESCAPES:
            return ("lit", _CHAR_ESCAPES[ch])
        if ch in ("u", "x"):
            width = 4 if ch == "u" else 2
            digits = self.src[self.pos : self.pos + width]
            if len(digits) != width or any(c not in string.hexdigits for c in digits):
                raise self._error(f"bad \\{ch} escape")
            self.pos += width
            return ("lit", chr(int(digits, 16)))
        if ch in ("b", "B") and not in_class:
            return ("empty",)
        if ch == "b":
            return ("lit", "\b")
        if ch.isdigit() or ch == "k":
            raise self._error("backreferences are not supported")
        if ch.isalnum():
            raise self._error(f"unsupported escape \\{ch}")
        return ("lit", ch)

    def _class_char(self) -> tuple[Any, ...]:
        ch = self._peek()
        if not ch:
            raise self._error("unterminated character class")
        self.pos += 1
        if ch == "\\":
            return self._escape(in_class=True)
        return ("lit", ch)

    def _class(self) -> tuple[Any, ...]:
        negate = self._peek() == "^"
        if negate:
            self.pos += 1
        chars: list[str] = []
        first = True
        while True:
            if self._peek() == "]" and not first:
                self.pos += 1
                break
            first = False
            item = self._class_char()
            if (
                item[0] == "lit"
                and self._peek() == "-"
                and self.src[self.pos + 1 : self.pos + 2] not in ("]", "")
            ):
                self.pos += 1
                end = self._class_char()
                if end[0] != "lit" or ord(end[1]) < ord(item[1]):
                    raise self._error("bad character range")
                span = range(ord(item[1]), min(ord(end[1]), ord(item[1]) + 255) + 1)
                chars.extend(chr(c) for c in span)
            else:
                chars.extend(item[1])
        if negate:
            excluded = set(chars)
            chars = [c for c in _SET_ALPHABET if c not in excluded]
        if not chars:
            raise self._error("empty character class")
        return ("set", "".join(dict.fromkeys(chars)))

    def generate(self, seed: int, extra: int) -> str:
        """One string: class picks rotate with ``seed``; repeats take ``min + extra``."""
        out: list[str] = []
        picks = 0

        def walk(node: tuple[Any, ...]) -> None:
            nonlocal picks
            kind = node[0]
            if kind == "alt":
                walk(node[1][0])
            elif kind == "seq":
                for item in node[1]:
                    walk(item)
            elif kind == "lit":
                out.append(node[1])
            elif kind == "set":
                out.append(node[1][(seed + picks) % len(node[1])])
                picks += 1
            elif kind == "rep":
                _, inner, lo, hi = node
                for _ in range(int(min(lo + extra, hi))):
                    walk(inner)

        walk(self.tree)
        return "".join(out)


def _words(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    words = re.sub(r"[^A-Za-z0-9]+", " ", spaced).strip().lower()
    return words or "text"


def _singular(name: str) -> str:
    if name.endswith("ies") and len(name) > 4:
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith(("ss", "us", "is")) and len(name) > 3:
        return name[:-1]
    return name


def _base36(n: int) -> str:
    alphabet = string.digits + string.ascii_lowercase
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = alphabet[r] + out
        if not n:
            return out


def _fit_text(words: str, n: int, min_len: int, max_len: float) -> str:
    """``Sample <words> <n>``, trimmed (keeping the distinguishing number) or padded."""
    suffix = f" {n}"
    value = f"Sample {words}{suffix}"
    if len(value) > max_len:
        room = int(max_len) - len(suffix)
        if room >= 1:
            value = value[:room].rstrip() + suffix
        else:
            value = _base36(n)[-int(max_len) :] if max_len >= 1 else ""
    if len(value) < min_len:
        filler = f" More about the {words}."
        while len(value) < min_len:
            value += filler
        value = value[: int(max(min_len, min(len(value), max_len)))]
    return value


def _format_value(fmt: str, words: str, n: int) -> str | None:
    slug = re.sub(r"[^a-z0-9]+", "-", words).strip("-") or "item"
    day = (n - 1) % 28 + 1
    return {
        "email": f"{slug.replace('-', '.')}{n}@example.com",
        "uri": f"https://example.com/{slug}/{n}",
        "url": f"https://example.com/{slug}/{n}",
        "uri-reference": f"/{slug}/{n}",
        "date": f"2024-01-{day:02d}",
        "date-time": f"2024-01-{day:02d}T10:{n % 60:02d}:00Z",
        "time": f"10:{n % 60:02d}:00Z",
        "uuid": f"00000000-0000-4000-8000-{n:012d}",
        "hostname": f"{slug}-{n}.example.com",
        "ipv4": f"192.0.2.{n % 254 + 1}",
    }.get(fmt)


_MERGE_MAX = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_MERGE_MIN = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")


class _Instancer:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.counter = 0  # strings made so far: numbers them apart
        self.path_refs: list[str] = []  # the $refs followed down to the current schema
        self.cycles = 0  # how many of those were already on the path

    # -- schema plumbing --------------------------------------------------------------

    def _ref(self, ref: str) -> Any:
        if ref != "#" and not ref.startswith("#/"):
            raise ValueError(f"only local $ref are supported, got {ref!r}")
        node = self.root
        for part in ref[2:].split("/") if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise ValueError(f"unresolvable $ref {ref!r}")
        return node

    def _merge(self, a: dict[str, Any], b: Any) -> dict[str, Any]:
        if b is True:
            return a
        if b is False or not isinstance(b, dict):
            raise ValueError("no instance of a false schema")
        out = dict(a)
        for key, value in b.items():
            if key not in out:
                out[key] = value
            elif key == "properties":
                props = dict(out[key])
                for name, sub in value.items():
                    props[name] = {"allOf": [props[name], sub]} if name in props else sub
                out[key] = props
            elif key == "required":
                out[key] = list(dict.fromkeys([*out[key], *value]))
            elif key in _MERGE_MAX:
                out[key] = max(out[key], value)
            elif key in _MERGE_MIN:
                out[key] = min(out[key], value)
            elif key == "enum":
                out[key] = [v for v in out[key] if v in value]
            elif key == "type":
                mine = out[key] if isinstance(out[key], list) else [out[key]]
                theirs = value if isinstance(value, list) else [value]
                both = [t for t in mine if t in theirs or (t == "integer" and "number" in theirs)]
                both += [t for t in theirs if t == "integer" and "number" in mine]
                out[key] = list(dict.fromkeys(both)) or mine
            elif key == "allOf":
                out[key] = [*out[key], *value]
            elif key == "items" and isinstance(value, dict) and out[key] != value:
                out[key] = {"allOf": [out[key], value]}
            # Anything else (const, pattern, format, anyOf, ...): the first schema's wins.
        return out

    def _resolve(self, schema: Any, refs: list[str]) -> dict[str, Any]:
        """``schema`` with its $ref, allOf, anyOf and oneOf applied; adds the refs it follows."""
        for _ in range(64):
            if schema is True:
                return {}
            if schema is False or not isinstance(schema, dict):
                raise ValueError(f"no instance of the schema {schema!r}")
            if "$ref" in schema:
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                refs.append(schema["$ref"])
                schema = self._merge(rest, self._ref(schema["$ref"]))
            elif "allOf" in schema:
                rest = {k: v for k, v in schema.items() if k != "allOf"}
                for sub in schema["allOf"]:
                    rest = self._merge(rest, self._resolve(sub, refs))
                schema = rest
            elif "anyOf" in schema or "oneOf" in schema:
                key = "anyOf" if "anyOf" in schema else "oneOf"
                rest = {k: v for k, v in schema.items() if k != key}
                if not schema[key]:
                    raise ValueError(f"empty {key}")
                schema = self._merge(rest, schema[key][0])
            else:
                return schema
        raise ValueError("schema references do not resolve (a $ref cycle?)")

    @staticmethod
    def _type(schema: dict[str, Any]) -> str:
        kind = schema.get("type")
        if isinstance(kind, list):
            real = [t for t in kind if t != "null"]
            return real[0] if real else "null" if kind else "string"
        if isinstance(kind, str):
            return kind
        if any(k in schema for k in ("properties", "required", "additionalProperties")):
            return "object"
        if any(k in schema for k in ("items", "prefixItems", "minItems", "maxItems")):
            return "array"
        if any(k in schema for k in ("minimum", "maximum", "multipleOf")):
            return "number"
        return "string"

    # -- instances --------------------------------------------------------------------

    def make(self, schema: Any, name: str, ordinal: int, variant: int, depth: int) -> Any:
        if depth > 48:
            raise ValueError("schema nests too deep (a required $ref cycle?)")
        followed: list[str] = []
        schema = self._resolve(schema, followed)
        # A $ref met again on its own path (a recursive schema): from here on, fill only
        # what is required and give arrays minItems items, so the instance ends.
        cycle = any(ref in self.path_refs for ref in followed)
        self.path_refs.extend(followed)
        self.cycles += cycle
        try:
            return self._make(schema, name, ordinal, variant, depth)
        finally:
            del self.path_refs[len(self.path_refs) - len(followed) :]
            self.cycles -= cycle

    def _make(
        self, schema: dict[str, Any], name: str, ordinal: int, variant: int, depth: int
    ) -> Any:
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            if not schema["enum"]:
                raise ValueError("empty enum")
            return schema["enum"][variant % len(schema["enum"])]
        kind = self._type(schema)
        if kind == "object":
            return self._object(schema, ordinal, depth)
        if kind == "array":
            return self._array(schema, name, depth)
        if kind in ("integer", "number"):
            return self._number(schema, kind, ordinal + variant)
        if kind == "boolean":
            return variant % 2 == 0
        if kind == "null":
            return None
        if kind == "string":
            return self._string(schema, name, variant)
        raise ValueError(f"unknown type {kind!r}")

    def _object(self, schema: dict[str, Any], ordinal: int, depth: int) -> dict[str, Any]:
        props = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        shallow = self.cycles > 0
        out: dict[str, Any] = {}
        for key, sub in props.items():
            if shallow and key not in required:
                continue
            out[key] = self.make(sub, key, ordinal, 0, depth + 1)
        extra = schema.get("additionalProperties", True)
        extra_schema = extra if isinstance(extra, dict) else {}
        for key in required:
            if key not in out:
                out[key] = self.make(extra_schema, key, ordinal, 0, depth + 1)
        wanted = int(schema.get("minProperties", 0))
        if not props and isinstance(extra, dict) and extra and not shallow:
            wanted = max(wanted, 1)
        n = 0
        while len(out) < wanted and extra is not False:
            n += 1
            key = f"key_{n}"
            if key not in out:
                out[key] = self.make(extra_schema, key, ordinal, 0, depth + 1)
        return out

    def _array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", {})
        lo = int(schema.get("minItems", 0))
        hi = schema.get("maxItems", _INF)
        if items is False:
            hi = min(hi, len(prefix))
        if lo > hi:
            raise ValueError(f"no array with minItems {lo} and at most {hi} items")
        count = lo if self.cycles else int(max(lo, min(2, hi), min(len(prefix), hi)))
        child = _singular(name)
        out: list[Any] = []
        for i in range(count):
            sub = prefix[i] if i < len(prefix) else items
            value = self.make(sub, child, i + 1, 0, depth + 1)
            variant = 0
            while schema.get("uniqueItems") and value in out and variant < 8:
                variant += 1  # enums and booleans take their next value
                value = self.make(sub, child, i + 1, variant, depth + 1)
            out.append(value)
        return out

    def _number(self, schema: dict[str, Any], kind: str, preferred: int) -> int | float:
        integer = kind == "integer"
        lo, hi = schema.get("minimum"), schema.get("maximum")
        lo_open = hi_open = False
        ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if _is_number(ex_lo) and (lo is None or ex_lo >= lo):
            lo, lo_open = ex_lo, True
        if _is_number(ex_hi) and (hi is None or ex_hi <= hi):
            hi, hi_open = ex_hi, True
        if integer:
            if lo is not None:
                lo = math.floor(lo) + 1 if lo_open else math.ceil(lo)
            if hi is not None:
                hi = math.ceil(hi) - 1 if hi_open else math.floor(hi)
            lo_open = hi_open = False

        def fits(v: float) -> bool:
            above = lo is None or (v > lo if lo_open else v >= lo)
            below = hi is None or (v < hi if hi_open else v <= hi)
            return above and below

        start: float = preferred if integer else preferred + 0.5
        if lo is not None and start < lo:
            start = lo
        if hi is not None and start > hi:
            start = hi
        step = schema.get("multipleOf")
        if _is_number(step) and step > 0:
            first = math.ceil(start / step)
            for k in [*range(first, first + 64), *range(first - 1, first - 64, -1)]:
                value: int | float = k * step
                if float(value).is_integer():
                    value = int(value)
                elif integer:
                    continue
                exact = (
                    (value / step).is_integer() if isinstance(step, float) else value % step == 0
                )
                if fits(value) and exact:
                    return value
            raise ValueError(f"no multiple of {step} within the bounds of {schema!r}")
        if fits(start):
            return start
        if not integer and lo is not None and hi is not None:
            start = (lo + hi) / 2  # open bounds
        elif not integer and lo is not None:
            start = lo + 0.5
        elif not integer and hi is not None:
            start = hi - 0.5
        if not fits(start):
            raise ValueError(f"no {kind} within the bounds of {schema!r}")
        return start

    def _string(self, schema: dict[str, Any], name: str, variant: int) -> str:
        self.counter += 1
        n = self.counter
        min_len = int(schema.get("minLength", 0))
        max_len = schema.get("maxLength", _INF)
        if min_len > max_len:
            raise ValueError(f"minLength {min_len} > maxLength {max_len}")
        words = _words(name)
        pattern = schema.get("pattern")
        regex = None
        if pattern is not None:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} does not compile: {exc}") from None

        def ok(value: str) -> bool:
            return min_len <= len(value) <= max_len and (regex is None or bool(regex.search(value)))

        candidates: list[str] = []
        fmt = schema.get("format")
        formatted = _format_value(fmt, words, n) if isinstance(fmt, str) else None
        if formatted is not None:
            candidates.append(formatted)
        candidates.append(_fit_text(words, n, min_len, max_len))
        for value in candidates:
            if ok(value):
                return value
        if regex is None:
            raise ValueError(f"no string for {schema!r}")
        generator = _Pattern(pattern)
        # Repeats grow until the lengths fit; a variant (a uniqueItems retry) starts longer.
        extras = sorted({0, 1, 2, 4, 8, 16, 32, 64, 128, 256, min_len, max(0, min_len - 1)})
        extras = [extra + variant for extra in extras]
        tried: list[str] = []
        for extra in extras:
            for seed in (n, 0):
                value = generator.generate(seed, extra)
                if ok(value):
                    return value
                tried.append(value)
        raise ValueError(
            f"cannot generate a string matching {pattern!r} with length in "
            f"[{min_len}, {max_len}] (tried {tried[0]!r}, ...)"
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def schema_instance(schema: dict[str, Any], *, hint: str = "") -> Any:
    """A deterministic valid instance of a JSON Schema (the draft 2020-12 subset real
    schemas use); raises ValueError when it cannot make one.

    Every property is filled (optional ones too); arrays get ``max(minItems, min(2,
    maxItems))`` items; strings read like text (``"Sample headline 3"``, from the property
    name, or ``hint`` at the top level), numbered so no two positions repeat, trimmed or
    padded to ``minLength``/``maxLength``; ``pattern`` is generated from the regex when the
    text does not match; ``enum``/``const`` take the first value, ``anyOf``/``oneOf`` the
    first branch, ``allOf`` is merged, ``$ref`` follows ``#/$defs/...`` (any local pointer).
    The result is checked with ``jsonschema.Draft202012Validator`` before it is returned.
    """
    from jsonschema import Draft202012Validator

    instancer = _Instancer(schema)
    instance = instancer.make(schema, hint or "value", 1, 0, 0)
    error = next(iter(Draft202012Validator(schema).iter_errors(instance)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise ValueError(f"schema_instance made an invalid instance at {where}: {error.message}")
    return instance


_GUESS_KEY_RE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`|\"([A-Za-z_][A-Za-z0-9_]*)\"")
_JSON_WORD_RE = re.compile(r"\bjson\b", re.IGNORECASE)


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return _plain_text(message.get("content"))
    return ""


def _guess_keys(text_: str) -> list[str]:
    keys = [a or b for a, b in _GUESS_KEY_RE.findall(text_)]
    return [k for k in dict.fromkeys(keys) if k.lower() != "json"]


def _guess_reply(body: dict[str, Any]) -> str:
    """What a model writes when a JSON shape is only described in prose: a guess."""
    keys = _guess_keys(_plain_text(body.get("system"))) or _guess_keys(_last_user_text(body))
    guess = {key: f"Sample {_words(key)}" for key in keys or ["answer"]}
    return (
        "Sure! Here it is:\n\n```json\n"
        + json.dumps(guess, indent=2, ensure_ascii=False)
        + "\n```\nTell me if you want changes."
    )


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


def model_info(
    model_id: str,
    display_name: str | None = None,
    *,
    created_at: str = "2026-01-01T00:00:00Z",
    max_input_tokens: int = DEFAULT_CONTEXT_WINDOW,
    max_tokens: int = 64_000,
) -> dict[str, Any]:
    """One entry of ``GET /v1/models`` as the real API writes it."""
    return {
        "type": "model",
        "id": model_id,
        "display_name": display_name or model_id,
        "created_at": created_at,
        "lifecycle": "active",
        "deprecated_at": None,
        "retires_at": None,
        "max_input_tokens": max_input_tokens,
        "max_tokens": max_tokens,
    }


DEFAULT_MODELS = (
    model_info("claude-opus-5", "Claude Opus 5", created_at="2026-09-01T00:00:00Z"),
    model_info("claude-sonnet-5-5", "Claude Sonnet 5.5", created_at="2026-08-01T00:00:00Z"),
    model_info("claude-haiku-5-5", "Claude Haiku 5.5", created_at="2026-07-01T00:00:00Z"),
)


def _models_page(
    models: list[dict[str, Any]], query: dict[str, list[str]]
) -> tuple[list[dict[str, Any]], bool]:
    """One page of ``models`` (newest first) and whether more follow in its direction."""
    raw_limit = query.get("limit", ["20"])[-1]
    if not re.fullmatch(r"[0-9]+", raw_limit):
        raise _Invalid("limit: Input should be a valid integer")
    limit = int(raw_limit)
    if not 1 <= limit <= 1000:
        raise _Invalid(
            "limit: Input should be greater than or equal to 1"
            if limit < 1
            else "limit: Input should be less than or equal to 1000"
        )
    ordered = sorted(models, key=lambda m: m["created_at"], reverse=True)
    ids = [m["id"] for m in ordered]
    after, before = query.get("after_id", [None])[-1], query.get("before_id", [None])[-1]
    if after is not None and before is not None:
        raise _Invalid("Only one of after_id and before_id may be given")
    for cursor in (after, before):
        if cursor is not None and cursor not in ids:
            raise _Invalid(f"Invalid cursor: {cursor!r} is not a model id")
    if before is not None:
        end = ids.index(before)
        start = max(0, end - limit)
        return ordered[start:end], start > 0
    start = ids.index(after) + 1 if after is not None else 0
    return ordered[start : start + limit], start + limit < len(ordered)


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
        parts = urlsplit(self.path)
        if self.command == "GET" and parts.path == "/v1/models":
            self._list_models(parse_qs(parts.query, keep_blank_values=True))
            return
        self._send_error(404, "not_found_error", f"Not found: {self.command} {self.path}")

    def _list_models(self, query: dict[str, list[str]]) -> None:
        """``GET /v1/models``: newest first, a page of ``limit`` (1 to 1000, 20 by default)
        after ``after_id`` or before ``before_id``, with ``has_more``, ``first_id`` and
        ``last_id`` as the real API pages them."""
        fake = self.server.fake
        headers = {k.lower(): v for k, v in self.headers.items()}
        base_headers = {"request-id": f"req_{_rand()}"}
        fake._append(fake.models_requests, RecordedRequest({}, self.path, headers))
        if not headers.get("x-api-key") and not headers.get("authorization"):
            message = "authentication required: send an x-api-key or Authorization header"
            self._send_error(401, "authentication_error", message, base_headers)
            return
        try:
            self._wait(fake.models_delay)
        except _Abort:
            self.close_connection = True
            return
        if fake.models_reply is not None:
            reply = fake.models_reply
            headers_out = {**base_headers, **reply.headers}
            self._send_error(reply.status, reply.error_type, reply.message, headers_out)
            return
        try:
            page, has_more = _models_page(fake.models, query)
        except _Invalid as invalid:
            self._send_error(400, "invalid_request_error", str(invalid), base_headers)
            return
        payload = {
            "data": page,
            "has_more": has_more,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        }
        self._send_json(200, payload, base_headers)

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

        entry = fake._answer(body)
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
            elif isinstance(block, WebSearchBlock):
                out.extend(_web_search_blocks(block, fake))
            elif isinstance(block, CitedTextBlock):
                out.append(
                    {"type": "text", "text": block.text, "citations": _citations(block, fake)}
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
                if "citations" in block:
                    start_block["citations"] = []
            elif kind in ("tool_use", "server_tool_use"):
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
                for citation in block.get("citations") or []:
                    delta(index, {"type": "citations_delta", "citation": citation})
            elif kind in ("tool_use", "server_tool_use"):
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


def _web_search_blocks(block: WebSearchBlock, fake: FakeModelServer) -> list[dict[str, Any]]:
    tool_id = f"srvtoolu_{_rand()}"
    results = [
        {
            "type": "web_search_result",
            "url": url,
            "title": title,
            "encrypted_content": fake._issue(),
            "page_age": None,
        }
        for url, title in block.results
    ]
    return [
        {
            "type": "server_tool_use",
            "id": tool_id,
            "name": "web_search",
            "input": {"query": block.query},
        },
        {"type": "web_search_tool_result", "tool_use_id": tool_id, "content": results},
    ]


def _citations(block: CitedTextBlock, fake: FakeModelServer) -> list[dict[str, Any]]:
    return [
        {
            "type": "web_search_result_location",
            "url": url,
            "title": title,
            "cited_text": cited_text,
            "encrypted_index": fake._issue(),
        }
        for url, title, cited_text in block.citations
    ]


class FakeModelServer:
    """A scripted fake of the Anthropic Messages API on ``127.0.0.1:<ephemeral port>``.

    Attributes: ``base_url``; ``requests`` (every parsed POST /v1/messages body in order,
    as :class:`RecordedRequest` dicts, rejected ones included, with ``.error``);
    ``rejections`` (validation errors as :class:`Rejection` strings, count_tokens ones
    included); ``count_tokens_requests``; ``replies`` (the full message dicts served);
    ``issued_signatures``; ``context_window``; ``responder`` (``callable(body) -> Turn |
    ApiError`` used when the script is empty); ``models`` (what ``GET /v1/models`` lists,
    paged like the real API: see :func:`model_info`), ``models_requests`` and
    ``models_reply`` (an :func:`api_error` to answer the listing with instead) and
    ``models_delay`` (seconds it waits first).

    ``strict`` (settable; ``FakeModelServer(strict=True)``) answers, like a model that knows
    only what the request says and without consuming the script: a forced tool call
    (``tool_choice`` ``{"type": "tool", "name": N}``, or ``{"type": "any"}``: the first
    tool) with one ``tool_use`` whose input is :func:`schema_instance` of that tool's
    ``input_schema``; a request without tools that asks for JSON (the word, in the system
    prompt or the last user message) with prose around a fenced guess whose keys are the
    identifiers in backticks or double quotes of the system prompt (else of the user
    message).  Everything else takes the script.  ``strict_answers`` lists what strict mode
    answered: the tool name, or ``"guess"``, per request.
    """

    def __init__(
        self, *, context_window: int = DEFAULT_CONTEXT_WINDOW, strict: bool = False
    ) -> None:
        self.context_window = context_window
        self.strict = strict
        self.strict_answers: list[str] = []
        self.responder: Callable[[dict[str, Any]], ScriptEntry] | None = None
        self.requests: list[RecordedRequest] = []
        self.rejections: list[Rejection] = []
        self.count_tokens_requests: list[RecordedRequest] = []
        self.replies: list[dict[str, Any]] = []
        self.issued_signatures: set[str] = set()
        # GET /v1/models: what it lists (newest first by created_at), every listing asked
        # for, and an error to answer it with instead (None: the list).
        self.models: list[dict[str, Any]] = [dict(m) for m in DEFAULT_MODELS]
        self.models_requests: list[RecordedRequest] = []
        self.models_reply: ApiError | None = None
        self.models_delay = 0.0  # seconds before the listing answers
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

        def arrived() -> list[RecordedRequest] | None:
            with self._lock:
                return list(self.requests) if len(self.requests) >= n else None

        return eventually(
            arrived, timeout, lambda: f"expected {n} requests, got {len(self.requests)}"
        )

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

    def _answer(self, body: dict[str, Any]) -> ScriptEntry:
        if self.strict:
            found = _strict_entry(body)
            if found is not None:
                entry, label = found
                self._append(self.strict_answers, label)
                return entry
        entry = self._next_entry(body)
        searches = isinstance(entry, Turn) and any(
            isinstance(block, WebSearchBlock) for block in entry.blocks
        )
        offered = any(
            isinstance(tool, dict) and str(tool.get("type", "")).startswith("web_search_")
            for tool in body.get("tools") or []
        )
        if searches and not offered:
            # A model searches only when the request offers the server tool.
            return api_error(500, "api_error", "scripted a web search the request did not offer")
        return entry

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


def _strict_entry(body: dict[str, Any]) -> tuple[ScriptEntry, str] | None:
    """Strict mode's own answer to a validated request and its label, or None (the script)."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    choice = body.get("tool_choice")
    choice = choice if isinstance(choice, dict) else {}
    kind = choice.get("type")
    if tools and kind in ("tool", "any"):
        if kind == "tool":
            tool = next(t for t in tools if t.get("name") == choice.get("name"))
        else:
            tool = next((t for t in tools if "input_schema" in t), tools[0])
        name = tool["name"]
        try:
            instance = schema_instance(tool.get("input_schema") or {"type": "object"}, hint=name)
        except ValueError as exc:
            message = f"fake model (strict) cannot fill the input_schema of {name}: {exc}"
            return api_error(500, "api_error", message), name
        return Turn(tool_use(name, instance)), name
    if not tools and any(
        _JSON_WORD_RE.search(part)
        for part in (_plain_text(body.get("system")), _last_user_text(body))
    ):
        return Turn(text(_guess_reply(body))), "guess"
    return None


@pytest.fixture
def fake_model() -> Iterator[FakeModelServer]:
    """A started :class:`FakeModelServer`, stopped after the test."""
    server = FakeModelServer()
    server.start()
    yield server
    server.stop()
