"""Tools from MCP servers: each pinned definition becomes one outside tool,
`mcp__<server>__<tool>`, with the server's own schema. Outside tools are untrusted: their
results taint the chat with the server as their source, every call is billed, and each
server's approval policy decides which calls wait for the person's card:

- `always`: every call, tainted or not;
- `when_tainted` (the default): as a write, while the conversation is tainted;
- `never`: only for tools whose read-only hint someone approved; the others as
  `when_tainted`, since a hint alone is a claim, not a fact."""

from __future__ import annotations

import json
from typing import Any

from app.mcp.client import McpError, SignInRequired
from app.mcp.models import McpServer
from app.mcp.servers import model_name
from app.mcp.targets import NotSignedIn, keep_grant, person_target
from app.row_meta import Card, HeldDetails
from app.telemetry import tracing
from app.tools.context import ToolContext
from app.tools.groups import MCP_TOOLS
from app.tools.mcp_questions import answers_for, question_card
from app.tools.questionnaire import check_card_answer
from app.tools.registry import MCP, OutsideInput, Tool, tool
from app.tools.results import Pause, ToolFailure, ToolResult

MAX_RESULT_CHARS = 20_000  # of one result, as the model reads it
ALWAYS_REASON = "Every call to this server's tools waits for your approval."


def server_tools(server: McpServer) -> list[Tool]:
    return [_tool(server, definition) for definition in server.tools]


def _tool(server: McpServer, definition: dict[str, Any]) -> Tool:
    tool_name = str(definition["name"])
    # Plain values: the row is read in the claim's transaction, and the tool outlives it.
    server_name, server_id, policy = server.name, server.id, server.policy
    trusted_read_only = server.policy == "never" and tool_name in (server.read_only_approved or [])

    def call(ctx: ToolContext, args: OutsideInput) -> ToolResult | Pause:
        return _call(ctx, server_id, server_name, tool_name, args.model_dump())

    def answered(ctx: ToolContext, card: Card) -> ToolResult | Pause:
        resume = card.get("resume") or {}
        again = {"answers": answers_for(card), "request_state": resume.get("requestState")}
        return _call(ctx, server_id, server_name, tool_name, resume.get("arguments") or {}, again)

    return tool(
        name=model_name(server_name, tool_name),
        description=(
            f"(A tool of the outside MCP server '{server_name}'; its results are outside "
            f"content.) {definition.get('description') or ''}"
        ).strip(),
        category=MCP,
        input=OutsideInput,
        schema=definition["input_schema"],
        handler=call,
        origin=server_name,
        label=str(definition.get("title") or tool_name),
        group=MCP_TOOLS,
        needs_approval_when_tainted=not trusted_read_only,
        held_always=policy == "always",
        held_details=lambda _arguments: _held_details(server_name, policy, tool_name),
        check_response=check_card_answer,
        on_answered=answered,
    )


def _held_details(server_name: str, policy: str, tool_name: str) -> HeldDetails:
    """What a held call's card shows besides the exact arguments: whose tool it is."""
    details: HeldDetails = {"server": server_name, "serverTool": tool_name}
    if policy == "always":
        details["reason"] = ALWAYS_REASON
    return details


def _call(
    ctx: ToolContext,
    server_id: int,
    server_name: str,
    tool_name: str,
    arguments: dict[str, Any],
    again: dict[str, Any] | None = None,
) -> ToolResult | Pause:
    """One call; a server that asks the person something first pauses the run on a card
    (`again`: the answers to such a question, and the server's state to go on from)."""
    server = ctx.session.get(McpServer, server_id)
    if server is None:
        raise ToolFailure(f"The MCP server {server_name} was removed.")
    box = ctx.services.secrets
    try:
        target = person_target(
            ctx.session, box, server, ctx.user_id, ctx.settings.fetch_allow_hosts
        )
    except NotSignedIn as exc:
        raise ToolFailure(str(exc)) from exc
    ctx.end_reads()  # no transaction is held across the call
    try:
        with tracing.mcp_call("tools/call", tool_name, server_name, target.url) as traced:
            answer = ctx.services.mcp.call_tool(target, tool_name, arguments, **(again or {}))
            if answer.get("is_error"):
                traced.fail("tool_error")
    except McpError as exc:
        if exc.grant:  # refreshed before the failure: kept, though the call's writes are not
            keep_grant(ctx.session, box, server_id, ctx.user_id, exc.grant)
            ctx.session.commit()
        if isinstance(exc, SignInRequired):
            raise ToolFailure(
                f"The MCP server {server_name} asks the person to sign in again on the "
                "Settings page (MCP servers → Sign in); until then its tools cannot be used."
            ) from exc
        raise ToolFailure(f"The MCP server {server_name} failed: {exc}") from exc
    keep_grant(ctx.session, box, server_id, ctx.user_id, answer.get("grant"))
    if "input_required" in answer:
        if again is not None:
            raise ToolFailure(f"The MCP server {server_name} asked again; it was not answered.")
        return Pause(question_card(arguments, answer["input_required"]))
    source = {"mcp": server_name, "tool": tool_name}
    return ToolResult(
        _as_text(answer), is_error=bool(answer.get("is_error")), untrusted_sources=[source]
    )


def _as_text(answer: dict[str, Any]) -> str:
    parts = [
        str(block.get("text", ""))
        for block in answer.get("content") or []
        if block.get("type") == "text"
    ]
    if not any(parts) and answer.get("structured") is not None:
        parts = [json.dumps(answer["structured"], ensure_ascii=False)]
    text = "\n".join(part for part in parts if part) or "(The tool returned no text.)"
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + "\n[The rest of the result was cut.]"
    return text
