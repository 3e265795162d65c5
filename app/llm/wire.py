"""The Messages API as the model client sends and reads it: the request body encoded
once per call, and the content blocks assembled from the stream's raw events (plain JSON
objects, as the SDK's `Stream` decodes them, without building a typed model per event)."""

from __future__ import annotations

import copy
import json
from typing import Any

# The SDK's own encoding of a body (anthropic._utils._json): compact, not ASCII-escaped,
# no NaN.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# Tool lists whose encoding is kept; a process offers a handful (the host's phases, the
# agents' forced tools).
MAX_KEPT_TOOL_LISTS = 32


class RequestEncoder:
    """The JSON body of a streamed `POST /v1/messages`. The tool schemas are most of a
    host request's bytes (about 14 of 18 KB) and change only with the phase, so a tool
    list's encoding is kept and reused while an equal list is offered: comparing with a
    copy costs a twentieth of encoding it again.

    A request is plain JSON data (dicts, lists, strings, numbers), as the loop builds it."""

    def __init__(self) -> None:
        self._tools: dict[tuple[str | None, ...], tuple[list[Any], str]] = {}

    def body(self, request: dict[str, Any]) -> bytes:
        tools = request.get("tools")
        rest = {key: value for key, value in request.items() if key != "tools"}
        rest["stream"] = True
        if not isinstance(tools, list) or not tools:
            return _ENCODER.encode({**request, "stream": True}).encode()
        return ('{"tools":' + self._encoded_tools(tools) + "," + _ENCODER.encode(rest)[1:]).encode()

    def _encoded_tools(self, tools: list[Any]) -> str:
        key = tuple(tool.get("name") if isinstance(tool, dict) else None for tool in tools)
        kept = self._tools.get(key)
        if kept is not None and kept[0] == tools:
            return kept[1]
        encoded = _ENCODER.encode(tools)
        if len(self._tools) >= MAX_KEPT_TOOL_LISTS:
            self._tools.clear()
        # A copy: a list changed in place later must not match its old encoding.
        self._tools[key] = (copy.deepcopy(tools), encoded)
        return encoded


class TurnAccumulator:
    """Builds an assistant turn's content blocks from raw stream events, calling the
    callbacks (app.llm.client.StreamCallbacks) as text, tool input and reasoning arrive."""

    def __init__(self, callbacks: Any):
        self.blocks: list[dict[str, Any]] = []
        # The pieces of each block still streaming, joined when it stops (adding each piece
        # to a string would copy the whole text so far, per token).
        self.pieces: dict[int, list[str]] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.model: str | None = None  # the model that answered, as the server names it
        self.on_text = callbacks.on_text
        self.on_input_json = callbacks.on_input_json
        self.callbacks = callbacks

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "content_block_delta":
            self._delta(event["index"], event["delta"])
        elif kind == "message_start":
            self.usage.update(_usage(event["message"].get("usage")))
            self.model = event["message"].get("model")
        elif kind == "content_block_start":
            self._start(event["index"], event["content_block"])
        elif kind == "content_block_stop":
            self._stop(event["index"])
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason")
            self.usage.update(_usage(event.get("usage")))

    def _start(self, index: int, block: dict[str, Any]) -> None:
        data = _without_none(block)
        if data["type"] == "tool_use":
            data["input"] = {}
        elif data["type"] == "thinking" and self.callbacks.on_thinking_start:
            self.callbacks.on_thinking_start()
        if not data.get("citations"):
            data.pop("citations", None)  # a text block without citations sends none back
        while len(self.blocks) <= index:
            self.blocks.append({})
        self.blocks[index] = data
        self.pieces[index] = []

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        kind = delta["type"]
        if kind == "text_delta":
            text = delta["text"]
            self.pieces[index].append(text)
            if self.on_text and text:
                self.on_text(text)
        elif kind == "input_json_delta":
            partial = delta["partial_json"]
            self.pieces[index].append(partial)
            if self.on_input_json and partial:
                self.on_input_json(partial)
        elif kind == "thinking_delta":
            self.pieces[index].append(delta["thinking"])
        elif kind == "signature_delta":
            self.blocks[index]["signature"] = delta["signature"]
        elif kind == "citations_delta":
            self.blocks[index].setdefault("citations", []).append(_without_none(delta["citation"]))

    def _stop(self, index: int) -> None:
        block = self.blocks[index]
        self._join(index)
        if block.get("type") == "thinking" and self.callbacks.on_thinking_end:
            self.callbacks.on_thinking_end()

    def _join(self, index: int) -> None:
        pieces = self.pieces.pop(index, None)
        block = self.blocks[index]
        kind = block.get("type")
        if kind in ("tool_use", "server_tool_use") and pieces is not None:
            raw = "".join(pieces)
            try:
                block["input"] = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError:
                block["input"] = {"__invalid_json__": raw}
        elif kind in ("text", "thinking") and pieces:
            block[kind] = block.get(kind, "") + "".join(pieces)

    def content(self) -> list[dict[str, Any]]:
        """The blocks, a text or thinking block still open included (a tool call's input
        counts only once its block stopped)."""
        for index in list(self.pieces):
            if self.blocks[index].get("type") not in ("tool_use", "server_tool_use"):
                self._join(index)
        return [b for b in self.blocks if b and not (b["type"] == "text" and not b.get("text"))]


def _without_none(value: Any) -> Any:
    """A block as the SDK's `model_dump(exclude_none=True)` gives it: None fields left out,
    at any depth."""
    if isinstance(value, dict):
        return {key: _without_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_none(item) for item in value]
    return value


def _usage(usage: Any) -> dict[str, int]:
    if not isinstance(usage, dict):
        return {}
    return {key: value for key, value in usage.items() if isinstance(value, int)}
