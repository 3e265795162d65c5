"""Loopdesk as an MCP server: `POST /mcp`, the Model Context Protocol's streamable HTTP
transport (revision 2026-07-28, stateless: every request stands alone, so any process
answers it), with JSON answers. A bearer API token is required; its `read` scope lists and
reads (offers, personas, outputs, assets, campaigns, search across chats; outputs are also
resources), `chat` may also ask Loopdesk (`ask`: a new message in a chat, answered with
the reply or the card the run paused on). Every tool calls the functions the JSON API
calls (app/web/workspace_api.py, app/web/search.py, app/web/chat_actions.py), so no rule is
written twice, and someone else's id is "not found" here too."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, Response, g, jsonify, request
from flask_login import current_user
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from werkzeug.exceptions import HTTPException

from app.web.errors import ApiError
from app.web.mcp_ask import ask
from app.web.search import search_dict
from app.web.shapes import CampaignOut, OfferOut, OutputOut, PersonaOut
from app.web.workspace_api import asset_dict, own_one, own_page
from app.workspace.models import Campaign, Offer, Output, Persona, VisualAsset

bp = Blueprint("mcp_server", __name__)

PROTOCOL = "2026-07-28"
OLDER_PROTOCOLS = ("2025-11-25", "2025-06-18", "2025-03-26")
SERVER_INFO = {"name": "loopdesk", "version": "0.1.0"}
OUTPUT_URI = "loopdesk://outputs/"
PARSE_ERROR, INVALID_REQUEST, NO_METHOD, INVALID_PARAMS = -32700, -32600, -32601, -32602


class RpcError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoInput(Strict):
    pass


class PageInput(Strict):
    cursor: int = Field(0, ge=0, description="next_cursor of the page before")


class OfferId(Strict):
    offer_id: int = Field(ge=1)


class PersonaId(Strict):
    persona_id: int = Field(ge=1)


class OutputId(Strict):
    output_id: int = Field(ge=1)


class SearchInput(Strict):
    query: str = Field(min_length=1, max_length=200, description="Words to look for")


class AskInput(Strict):
    message: str = Field(min_length=1, max_length=20_000, description="What to ask Loopdesk")
    chat_id: int | None = Field(None, ge=1, description="A chat of yours; none starts one")


@dataclass(frozen=True)
class ServedTool:
    name: str
    description: str
    input: type[Strict]
    run: Callable[[Any], Any]
    scope: str = "read"

    def listed(self) -> dict[str, Any]:
        schema = self.input.model_json_schema()
        schema.pop("title", None)
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": schema,
            "annotations": {"readOnlyHint": self.scope == "read"},
        }


def _page(model, shape, dump=None) -> Callable[[PageInput], dict]:
    return lambda args: own_page(model, shape, 50, args.cursor, dump)


TOOLS = [
    ServedTool("list_offers", "Your offers, oldest first.", PageInput, _page(Offer, OfferOut)),
    ServedTool("get_offer", "One offer.", OfferId, lambda a: own_one(Offer, a.offer_id, OfferOut)),
    ServedTool("list_personas", "Your personas.", PageInput, _page(Persona, PersonaOut)),
    ServedTool(
        "get_persona",
        "One persona.",
        PersonaId,
        lambda a: own_one(Persona, a.persona_id, PersonaOut),
    ),
    ServedTool(
        "list_outputs", "Your saved outputs (quizzes, ads...).", PageInput, _page(Output, OutputOut)
    ),
    ServedTool(
        "get_output",
        "One saved output.",
        OutputId,
        lambda a: own_one(Output, a.output_id, OutputOut),
    ),
    ServedTool("list_assets", "Your images.", PageInput, _page(VisualAsset, None, asset_dict)),
    ServedTool("list_campaigns", "Your campaigns.", PageInput, _page(Campaign, CampaignOut)),
    ServedTool(
        "search_chats", "Search your chats' messages.", SearchInput, lambda a: search_dict(a.query)
    ),
    ServedTool(
        "ask",
        "Ask Loopdesk, as in a chat: the answer, or the question it asks you back (answer "
        "it in the app).",
        AskInput,
        lambda a: ask(a.message, a.chat_id),
        scope="chat",
    ),
]
BY_NAME = {tool.name: tool for tool in TOOLS}


@bp.post("/mcp")
def endpoint():
    """Loopdesk as an MCP server: one JSON-RPC message, answered in JSON (a bearer token)."""
    refusal = _refused()
    if refusal is not None:
        return refusal
    message = request.get_json(silent=True)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _error(None, INVALID_REQUEST, "Send one JSON-RPC 2.0 message.")
    if "id" not in message:
        return Response(status=202)  # a notification: nothing to answer
    try:
        result = _dispatch(str(message.get("method", "")), message.get("params") or {})
    except RpcError as failure:
        return _error(message["id"], failure.code, str(failure))
    return jsonify({"jsonrpc": "2.0", "id": message["id"], "result": result})


@bp.route("/mcp", methods=["GET", "DELETE"])
def no_stream():
    """A stateless server keeps no stream and no session to end."""
    return Response(status=405, headers={"Allow": "POST"})


def _refused() -> Response | None:
    """A bearer token is required (a browser's cookie is no MCP client), and a browser page
    of another origin may not call it (DNS rebinding)."""
    origin = request.headers.get("Origin")
    if origin and urlsplit(origin).netloc != request.host:
        return _http_error(403, "Requests from another origin are refused.")
    if not (current_user.is_authenticated and g.get("authenticated_by_bearer")):
        response = _http_error(401, "Send Authorization: Bearer <an API token>.")
        response.headers["WWW-Authenticate"] = 'Bearer realm="loopdesk"'
        return response
    return None


def _http_error(status: int, text: str) -> Response:
    response = jsonify({"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": text}})
    response.status_code = status
    return response


def _error(ident: Any, code: int, text: str) -> Response:
    return jsonify({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": text}})


def _dispatch(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "server/discover":
        return _listing(
            {"capabilities": _capabilities(), "supportedVersions": [PROTOCOL, *OLDER_PROTOCOLS]}
        )
    if method == "initialize":  # clients of the older, session-based revisions
        asked = str(params.get("protocolVersion") or "")
        version = asked if asked in OLDER_PROTOCOLS else OLDER_PROTOCOLS[0]
        return {
            "protocolVersion": version,
            "capabilities": _capabilities(),
            "serverInfo": SERVER_INFO,
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return _listing({"tools": [tool.listed() for tool in TOOLS if _may(tool.scope)]})
    if method == "tools/call":
        return _complete(_call(params))
    if method == "resources/templates/list":
        template = {
            "uriTemplate": OUTPUT_URI + "{output_id}",
            "name": "output",
            "description": "One of your saved outputs, as JSON.",
            "mimeType": "application/json",
        }
        return _listing({"resourceTemplates": [template]})
    if method == "resources/list":
        outputs = own_page(Output, OutputOut, 100, 0)["items"]
        return _listing({"resources": [_resource(output) for output in outputs]})
    if method == "resources/read":
        return _complete({"contents": [_read_output(str(params.get("uri", "")))]})
    raise RpcError(NO_METHOD, f"Loopdesk does not answer {method!r}.")


def _complete(result: dict[str, Any]) -> dict[str, Any]:
    return {
        **result,
        "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
    }


def _listing(result: dict[str, Any]) -> dict[str, Any]:
    """A list's answer, with its cache hints: per person, and never to be reused (what a
    person may see changes with every save)."""
    return _complete({**result, "cacheScope": "private", "ttlMs": 0})


def _capabilities() -> dict[str, Any]:
    return {"tools": {}, "resources": {}}


def _may(scope: str) -> bool:
    return scope in g.get("token_scopes", frozenset())


def _call(params: dict[str, Any]) -> dict[str, Any]:
    tool = BY_NAME.get(str(params.get("name", "")))
    if tool is None:
        raise RpcError(INVALID_PARAMS, f"There is no tool named {params.get('name')!r}.")
    if not _may(tool.scope):
        return _tool_error(f"This token lacks the {tool.scope!r} scope that {tool.name} needs.")
    try:
        arguments = tool.input.model_validate(params.get("arguments") or {})
    except ValidationError as invalid:
        first = invalid.errors()[0]
        where = "/".join(str(part) for part in first["loc"]) or "arguments"
        raise RpcError(INVALID_PARAMS, f"{where}: {first['msg']}") from None
    try:
        value = tool.run(arguments)
    except ApiError as refusal:
        return _tool_error(refusal.message)
    except HTTPException as refusal:
        return _tool_error("Not found." if refusal.code == 404 else str(refusal.description))
    text = json.dumps(value, ensure_ascii=False)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": value,
        "isError": False,
    }


def _tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _resource(output: dict[str, Any]) -> dict[str, Any]:
    return {
        "uri": f"{OUTPUT_URI}{output['id']}",
        "name": str(output.get("title") or f"output {output['id']}"),
        "mimeType": "application/json",
    }


def _read_output(uri: str) -> dict[str, Any]:
    number = uri.removeprefix(OUTPUT_URI)
    if not uri.startswith(OUTPUT_URI) or not number.isascii() or not number.isdigit():
        raise RpcError(INVALID_PARAMS, f"No resource {uri!r}.")
    try:
        output = own_one(Output, int(number), OutputOut)
    except HTTPException:
        raise RpcError(INVALID_PARAMS, f"No resource {uri!r}.") from None
    return {"uri": uri, "mimeType": "application/json", "text": json.dumps(output)}
