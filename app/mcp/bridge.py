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

A request: {"id": 1, "op": "list_tools" | "call_tool" | "sign_in_start" | "sign_in_finish",
"target": {"url": ..., "headers": {...}, "grant": {...}, "public_only": bool, "allow_hosts":
[...]} or {"command": [program, arg, ...]}, "timeout": seconds, and for a call "name" and
"arguments"}. An answer: {"id": 1, "ok": true, "result": {...}} or {"id": 1, "ok": false,
"error": "what went wrong", "sign_in": true when the server wants a (new) sign-in}; either
carries "grant" when the SDK refreshed the person's tokens on the way. Every request is
bounded by its timeout; nothing waits longer.

Per-person OAuth (a server that answers 401) is the SDK's `OAuthClientProvider`: it
discovers the authorization server, registers us, builds the authorization request and,
with a grant, sends the bearer token and refreshes it. A sign-in spans two web requests
that any process may serve, so nothing is held here between them: `sign_in_start` keeps
the SDK's authorization URL but swaps in a PKCE pair and state the caller seals and keeps,
and `sign_in_finish` exchanges the code with them.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import secrets
import sys
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

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


class SignInNeeded(Exception):
    """The server wants the person to sign in (again): no grant, or one it no longer takes."""


class InternalAddress(Exception):
    """A person's server, or an address its metadata names, is on our own network."""


class _Paused(Exception):
    """Raised at the SDK's redirect: a sign-in goes on in the person's browser."""


class GrantStore:
    """The SDK's token storage, in memory for one request: what the caller sent, and
    whether the SDK replaced the tokens (a refresh), to send back to be sealed."""

    def __init__(self, grant: dict[str, Any] | None) -> None:
        from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

        grant = grant or {}
        self.tokens = OAuthToken(**grant["tokens"]) if grant.get("tokens") else None
        info = grant.get("client_info")
        self.client_info = OAuthClientInformationFull(**info) if info else None
        self.changed = False

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens, self.changed = tokens, True

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


def _provider(target: dict[str, Any], store: GrantStore, redirect: Any) -> Any:
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    grant = target.get("grant") or {}

    async def no_callback() -> Any:
        raise SignInNeeded

    metadata = OAuthClientMetadata(
        client_name="Loopdesk",
        redirect_uris=[grant["redirect_uri"]],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=grant.get("scope"),
    )
    provider = OAuthClientProvider(
        server_url=target["url"],
        client_metadata=metadata,
        storage=store,
        redirect_handler=redirect,
        callback_handler=no_callback,
    )
    # Loaded tokens carry no expiry for the SDK; ours lets it refresh before it is refused.
    provider.context.token_expiry_time = grant.get("expires_at")
    return provider


async def _sign_in_again(_url: str) -> None:
    raise SignInNeeded


def _client(target: dict[str, Any], auth: Any = None, refused: set[int] | None = None) -> Any:
    from mcp import Client, StdioServerParameters

    if "command" in target:
        program, *args = target["command"]
        # No env: the SDK passes only HOME, PATH, USER and the like to the server.
        server: Any = StdioServerParameters(command=program, args=args)
    else:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers=target.get("headers") or {}, auth=auth)
        _hook(http, target, refused)
        server = streamable_http_client(target["url"], http_client=http)
    return Client(server, elicitation_callback=_never_asked)


def _hook(http: Any, target: dict[str, Any], refused: set[int] | None = None) -> None:
    """Checks on every request (internal addresses, for a person's server) and a note of
    a 401 (the SDK's transport turns it into a bare JSON-RPC error)."""
    hooks: dict[str, list[Any]] = {"request": [], "response": []}
    if target.get("public_only"):
        hooks["request"].append(_public_hosts_only(target.get("allow_hosts") or []))
    if refused is not None:

        async def note(response: Any) -> None:
            if response.status_code in (401, 403):
                refused.add(response.status_code)

        hooks["response"].append(note)
    http.event_hooks = hooks


def _public_hosts_only(allowed: list[str]) -> Any:
    """A request hook refusing internal addresses: a person's server, and the
    authorization servers its metadata names, may not point us at our own network."""

    async def check(request: Any) -> None:
        host = request.url.host.strip("[]").lower()
        if host in allowed:
            return
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        found = await asyncio.get_running_loop().getaddrinfo(host, port)
        for *_rest, address in found:
            if not ipaddress.ip_address(str(address[0]).split("%")[0]).is_global:
                raise InternalAddress(f"{host} is an internal address and may not be reached.")

    return check


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


async def _start_sign_in(target: dict[str, Any]) -> dict[str, Any]:
    """Discovery and registration by the SDK, up to the authorization URL it would send
    the person to, with our own PKCE pair and state in it (the caller keeps them)."""
    from mcp.client.auth import PKCEParameters

    store = GrantStore({"client_info": (target.get("grant") or {}).get("client_info")})
    asked: dict[str, str] = {}

    async def redirect(url: str) -> None:
        asked["url"] = url
        raise _Paused

    provider = _provider(target, store, redirect)
    try:
        async with _client(target, provider) as client:
            await client.list_tools()
    except Exception:
        if "url" not in asked:
            raise
    if "url" not in asked:
        raise ValueError("The server did not ask for a sign-in.")
    if store.client_info is None:
        raise ValueError("The server's authorization server did not register us.")
    pkce, state = PKCEParameters.generate(), secrets.token_urlsafe(32)
    parts = urlsplit(asked["url"])
    query = dict(parse_qsl(parts.query))
    query.update(code_challenge=pkce.code_challenge, code_challenge_method="S256", state=state)
    context = provider.context
    with_resource = context.should_include_resource_param(context.protocol_version)
    metadata = context.oauth_metadata
    return {
        "authorization_url": urlunsplit(parts._replace(query=urlencode(query))),
        "state": state,
        "verifier": pkce.code_verifier,
        "client_info": store.client_info.model_dump(mode="json", exclude_none=True),
        "oauth_metadata": metadata.model_dump(mode="json", exclude_none=True) if metadata else None,
        "resource": context.get_resource_url() if with_resource else None,
        "scope": context.client_metadata.scope,
    }


async def _finish_sign_in(target: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The authorization code exchanged for the person's tokens (PKCE, the resource)."""
    from mcp.client.auth.utils import handle_token_response_scopes
    from mcp.client.auth.utils import validate_authorization_response_iss as check_issuer
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.auth import OAuthMetadata

    started = request["started"]
    grant = target["grant"]
    metadata = started.get("oauth_metadata")
    metadata = OAuthMetadata.model_validate(metadata) if metadata else None
    check_issuer(request.get("iss"), metadata)
    store = GrantStore({"client_info": started["client_info"]})
    if store.client_info is None:
        raise ValueError("The sign-in was started without a registration.")
    context = _provider(target, store, _sign_in_again).context
    context.client_info = store.client_info
    origin = context.get_authorization_base_url(target["url"])
    token_url = str(metadata.token_endpoint) if metadata else urljoin(origin, "/token")
    form = {
        "grant_type": "authorization_code",
        "code": request["code"],
        "redirect_uri": grant["redirect_uri"],
        "client_id": store.client_info.client_id,
        "code_verifier": started["verifier"],
    }
    if started.get("resource"):
        form["resource"] = started["resource"]
    form, headers = context.prepare_token_auth(
        form, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    async with create_mcp_http_client() as http:
        _hook(http, target)
        response = await http.post(token_url, data=form, headers=headers)
    if response.status_code not in (200, 201):
        raise ValueError(f"The server refused the sign-in (HTTP {response.status_code}).")
    tokens = await handle_token_response_scopes(response)
    if tokens.scope is None:
        tokens.scope = started.get("scope")
    return _granted(tokens, started["client_info"], started.get("scope"))


def _granted(tokens: Any, client_info: Any, scope: str | None) -> dict[str, Any]:
    expires_in = tokens.expires_in
    expires_at = time.time() + expires_in if expires_in is not None else None
    return {
        "tokens": tokens.model_dump(mode="json", exclude_none=True),
        "expires_at": expires_at,
        "client_info": client_info,
        "scope": scope,
    }


async def _run(
    request: dict[str, Any], store: GrantStore | None, refused: set[int]
) -> dict[str, Any]:
    target, op = request["target"], request["op"]
    if op == "sign_in_start":
        return await _start_sign_in(target)
    if op == "sign_in_finish":
        return await _finish_sign_in(target, request)
    auth = _provider(target, store, _sign_in_again) if store is not None else None
    async with _client(target, auth, refused) as client:
        if op == "list_tools":
            return await _list_tools(client)
        return await _call_tool(client, request)


async def _handle(request: dict[str, Any]) -> None:
    ident = request.get("id")
    target = request.get("target") or {}
    store = GrantStore(target["grant"]) if target.get("grant") and "url" in target else None
    answer: dict[str, Any]
    refused: set[int] = set()
    try:
        async with asyncio.timeout(float(request.get("timeout") or 10)):
            answer = {"ok": True, "result": await _run(request, store, refused)}
    except TimeoutError:
        answer = {"ok": False, "error": "The server did not answer in time."}
    except Exception as exc:  # every failure is an answer: the caller must never hang
        answer = {"ok": False, "error": _described(exc)}
        if 401 in refused or _wants_sign_in(exc):
            answer.update(sign_in=True, error="The server asks you to sign in.")
    if store is not None and store.changed and store.tokens is not None:
        grant = target["grant"]
        answer["grant"] = _granted(store.tokens, grant.get("client_info"), grant.get("scope"))
    _answer({"id": ident, **answer})


def _wants_sign_in(exc: BaseException) -> bool:
    """A 401 from the server, or the SDK's flow reaching the point of a new sign-in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, SignInNeeded):
        return True
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None) == 401


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
    if isinstance(exc, InternalAddress):
        return str(exc)
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
