"""The demo model's engine: a stand-in for the Anthropic Messages API, served in-process.

When no model is configured, `DemoTransport` is plugged into the real SDK as its HTTP
transport, so a run goes through exactly the code path it takes with a real model: the SDK
builds the request, the transport answers it with the API's wire format (a JSON message,
or `text/event-stream` when the body asks for `"stream": true`), and the SDK decodes it.
What it answers is the script's business (app/llm/demo/script.py)."""

from __future__ import annotations

import json
import math
import re
import secrets
import time
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx

from app.config import DEMO_MODEL_NAME
from app.llm.demo.script import respond
from app.llm.demo.wire import Reply, estimate_input_tokens, estimate_output_tokens

DEFAULT_DELAY = 0.015


class _EventStream(httpx.SyncByteStream):
    """A response body produced chunk by chunk; closing it stops the generator."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()


class DemoTransport(httpx.BaseTransport):
    """Answers `POST /v1/messages` and `POST /v1/messages/count_tokens` like the API.

    `delay` is the pause in seconds before each streamed delta, so text visibly streams.
    """

    def __init__(self, delay: float = DEFAULT_DELAY):
        self.delay = delay

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return _error(404, "not_found_error", f"Not found: {request.method} {path}", request)
        if request.method != "POST":
            return _error(
                405, "invalid_request_error", f"Method {request.method} not allowed", request
            )
        request.read()
        try:
            body = json.loads(request.content or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(
                400, "invalid_request_error", "The request body is not valid JSON.", request
            )
        if not isinstance(body, dict):
            return _error(
                400, "invalid_request_error", "The request body must be a JSON object.", request
            )
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(
                400, "invalid_request_error", "messages: at least one message is required", request
            )
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error(400, "invalid_request_error", "model: Field required", request)

        input_tokens = estimate_input_tokens(body)
        if path.endswith("/count_tokens"):
            return _json(200, {"input_tokens": input_tokens}, request)
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            return _error(400, "invalid_request_error", "max_tokens: Field required", request)

        reply = respond(body)
        message = _message(body, reply, input_tokens)
        if body.get("stream"):
            return httpx.Response(
                200,
                headers={
                    "content-type": "text/event-stream; charset=utf-8",
                    "cache-control": "no-cache",
                    "request-id": _request_id(),
                },
                stream=_EventStream(self._events(message)),
                request=request,
            )
        return _json(200, message, request)

    def _events(self, message: dict[str, Any]) -> Iterator[bytes]:
        """The message as the API streams it: start, blocks in deltas, delta, stop."""
        start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
        start["usage"] = {**message["usage"], "output_tokens": 1}
        yield _sse("message_start", {"type": "message_start", "message": start})
        yield _sse("ping", {"type": "ping"})
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                opening: dict[str, Any] = {"type": "text", "text": ""}
                looks_like_json = block["text"].lstrip().startswith("{")
                pieces = (
                    _json_pieces(block["text"]) if looks_like_json else _text_pieces(block["text"])
                )
                deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
            else:
                opening = {**block, "input": {}}
                raw = json.dumps(block["input"], ensure_ascii=False)
                # A long input (an agent's answer) streams in small pieces, as a model writes.
                pieces = _json_pieces(raw) if len(raw) > 120 else _split_in(raw, 3)
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
            yield _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
            for delta in deltas:
                if self.delay > 0:
                    time.sleep(self.delay)
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _request_id() -> str:
    return f"req_demo_{secrets.token_hex(12)}"


def _json(status: int, payload: dict[str, Any], request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        status,
        headers={"content-type": "application/json", "request-id": _request_id()},
        content=json.dumps(payload, ensure_ascii=False).encode(),
        request=request,
    )


def _error(status: int, kind: str, message: str, request: httpx.Request) -> httpx.Response:
    return _json(status, {"type": "error", "error": {"type": kind, "message": message}}, request)


def _message(body: dict[str, Any], reply: Reply, input_tokens: int) -> dict[str, Any]:
    return {
        "id": f"msg_demo_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or DEMO_MODEL_NAME,
        "content": reply.blocks,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": estimate_output_tokens(reply.blocks),
        },
    }


def _text_pieces(text: str, words: int = 3) -> list[str]:
    """Text in chunks of a few words (whitespace kept), so it streams like a model's."""
    tokens = re.findall(r"\s*\S+\s*", text) or [text]
    return ["".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]


def _json_pieces(text: str, size: int = 40) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [text]


def _split_in(text: str, parts: int) -> list[str]:
    """Text in `parts` roughly equal pieces (fewer when it is shorter)."""
    if len(text) < parts:
        return [text]
    size = math.ceil(len(text) / parts)
    return [text[i : i + size] for i in range(0, len(text), size)]
