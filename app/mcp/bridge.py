"""Calls to MCP servers, in a process of its own: `python bridge.py` reads one JSON request
a line on stdin and writes one JSON answer a line on stdout, in any order (each names its
request's `id`).

The official `mcp` SDK is asyncio. The web process of `make run` is one gevent loop whose
child watchers exist only on the main thread, so the SDK cannot spawn a stdio server from a
thread there, and an event loop inside a greenlet would hold everyone. Here it runs on an
ordinary asyncio loop; the caller (app/mcp/client.py) only writes and reads lines. It is a
script of the standard library and the SDK only (not the app package), so it starts quickly
and never holds the app's settings: the process is started with an environment that carries
no secret, and a server's headers come with each request and are never written anywhere.

A request: {"id": 1, "op": "list_tools" | "call_tool", "target": {"url": ..., "headers":
{...}} or {"command": [program, arg, ...]}, "timeout": seconds, and for a call "name" and
"arguments"}. An answer: {"id": 1, "ok": true, "result": {...}} or {"id": 1, "ok": false,
"error": "what went wrong"}. Every request is bounded by its timeout; nothing waits longer.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

MAX_PAGES = 20  # tools/list pages read at most (a server that keeps paging is cut off)
MAX_TOOLS = 1_000  # tools read at most; the caller refuses a server past its own bound
MAX_TEXT = 200_000  # characters of one result kept; the caller trims further
_write_lock = threading.Lock()


def _answer(message: dict[str, Any]) -> None:
    line = json.dumps(message, ensure_ascii=False, default=str)
    with _write_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


async def _never_asked(*_args: Any, **_kwargs: Any) -> Any:
    """Declares that we can elicit: a server of the stateless revision sends its question
    back as an input-required result (the run pauses on a card). A server of an older
    revision asks within the call, which no card can outlive: it is declined."""
    import mcp_types as types

    return types.ElicitResult(action="decline")


def _client(target: dict[str, Any]) -> Any:
    from mcp import Client, StdioServerParameters

    if "command" in target:
        program, *args = target["command"]
        # No env: the SDK passes only HOME, PATH, USER and the like to the server.
        server: Any = StdioServerParameters(command=program, args=args)
    else:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers=target.get("headers") or {})
        server = streamable_http_client(target["url"], http_client=http)
    return Client(server, elicitation_callback=_never_asked)


def _tool(tool: Any) -> dict[str, Any]:
    annotations = tool.annotations
    return {
        "name": tool.name,
        "title": tool.title or (annotations.title if annotations else None),
        "description": tool.description or "",
        "input_schema": tool.input_schema,
        "read_only_hint": bool(annotations and annotations.read_only_hint),
    }


async def _list_tools(client: Any) -> dict[str, Any]:
    tools: list[dict[str, Any]] = []
    cursor = None
    ttl_ms = None
    for _page in range(MAX_PAGES):
        listed = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        if ttl_ms is None:
            ttl_ms = getattr(listed, "ttl_ms", None)
        tools.extend(_tool(tool) for tool in listed.tools)
        cursor = listed.next_cursor
        if not cursor or len(tools) > MAX_TOOLS:
            break
    return {"tools": tools[: MAX_TOOLS + 1], "ttl_ms": ttl_ms}


def _block(block: Any) -> dict[str, Any]:
    kind = getattr(block, "type", "")
    if kind == "text":
        return {"type": "text", "text": block.text[:MAX_TEXT]}
    if kind == "resource":
        text = getattr(block.resource, "text", None)
        if text is not None:
            return {"type": "text", "text": str(text)[:MAX_TEXT]}
    return {"type": kind or "unknown"}


async def _call_tool(client: Any, request: dict[str, Any]) -> dict[str, Any]:
    import mcp_types as types

    responses = {
        key: types.ElicitResult(**answer) for key, answer in (request.get("answers") or {}).items()
    }
    result = await client.session.call_tool(
        request["name"],
        request["arguments"],
        allow_input_required=True,
        input_responses=responses or None,
        request_state=request.get("request_state"),
    )
    if isinstance(result, types.InputRequiredResult):
        return {"input_required": _questions(result)}
    return {
        "content": [_block(block) for block in result.content or []],
        "structured": result.structured_content,
        "is_error": bool(result.is_error),
    }


def _questions(result: Any) -> dict[str, Any]:
    """What the server asks (form elicitations only: {key: {message, schema}}) and its
    opaque state, to send back with the answers."""
    asked = {}
    for key, request in (result.input_requests or {}).items():
        params = getattr(request, "params", None)
        schema = getattr(params, "requested_schema", None)
        if getattr(request, "method", "") != "elicitation/create" or params is None:
            raise ValueError("the server asked for something other than a form to fill")
        if schema is None:
            raise ValueError("the server asked for a form without its fields")
        schema = schema if isinstance(schema, dict) else schema.model_dump(exclude_none=True)
        asked[key] = {"message": params.message, "schema": schema}
    return {"questions": asked, "request_state": result.request_state}


async def _handle(request: dict[str, Any]) -> None:
    ident = request.get("id")
    try:
        with_timeout = asyncio.timeout(float(request.get("timeout") or 10))
        async with with_timeout, _client(request["target"]) as client:
            if request["op"] == "list_tools":
                result = await _list_tools(client)
            else:
                result = await _call_tool(client, request)
        _answer({"id": ident, "ok": True, "result": result})
    except TimeoutError:
        _answer({"id": ident, "ok": False, "error": "The server did not answer in time."})
    except Exception as exc:  # every failure is an answer: the caller must never hang
        _answer({"id": ident, "ok": False, "error": _described(exc)})


PLAIN_WORDS = {
    "ConnectError": "Could not connect to the server.",
    "ConnectTimeout": "Could not connect to the server in time.",
    "FileNotFoundError": "The server's program was not found.",
    "PermissionError": "The server's program may not be run.",
}


def _described(exc: BaseException) -> str:
    """One line saying what failed, found in an exception group if the SDK raised one."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if type(exc).__name__ in PLAIN_WORDS:
        return PLAIN_WORDS[type(exc).__name__]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__


def _read_requests(loop: asyncio.AbstractEventLoop, tasks: set[Any]) -> None:
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        future = asyncio.run_coroutine_threadsafe(_handle(request), loop)
        tasks.add(future)
        future.add_done_callback(tasks.discard)
    loop.call_soon_threadsafe(loop.stop)


def main() -> None:
    loop = asyncio.new_event_loop()
    tasks: set[Any] = set()
    reader = threading.Thread(target=_read_requests, args=(loop, tasks), daemon=True)
    reader.start()
    loop.run_forever()


if __name__ == "__main__":
    main()
