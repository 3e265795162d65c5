"""Which tools a step offers, computed in one place; the capability notes in the system
prompt are derived from the same list, so the prompt never promises a missing tool."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.mcp.servers import servers_for
from app.mcp.targets import signed_in_server_ids
from app.tools.groups import is_on
from app.tools.mcp_tools import server_tools
from app.tools.project_choice import SELECT_PROJECT
from app.tools.registry import Tool, ToolRegistry

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.chat.run_services import RunServices


def run_tools(
    session: Session,
    services: RunServices,
    user_id: int,
    groups: frozenset[str] | None = None,
) -> ToolRegistry:
    """A run's tools: the process's own, then the pinned tools of the MCP servers this
    person may call (the admin's and their own; of those that ask for a sign-in, the ones
    they signed in to), read in the caller's transaction. `groups`: only those of these
    tool groups (the chat's preset's), so a call to another is refused as unknown."""
    servers = servers_for(session, user_id)
    signed_in = signed_in_server_ids(session, user_id) if any(s.sign_in for s in servers) else set()
    usable = [server for server in servers if not server.sign_in or server.id in signed_in]
    outside = [tool for server in usable for tool in server_tools(server)]
    registry = services.tools.extended(outside) if outside else services.tools
    if groups is None:
        return registry
    kept = ToolRegistry()
    for tool in registry.all():
        if is_on(tool, groups):
            kept.add(tool)
    return kept


def tools_for_step(
    registry: ToolRegistry,
    phase: str,
    ask_project: bool = False,
    groups: frozenset[str] | None = None,
) -> list[Tool]:
    """The tools offered at this step. `ask_project`: the person is in several projects
    and the chat's was never chosen, so select_project is offered (else it is not).
    `groups`: the chat's preset's tool groups (None: no preset, all of them)."""
    return [
        tool
        for tool in registry.all()
        if (tool.phase == "discovery" or phase == "build")
        and (ask_project or tool.name != SELECT_PROJECT)
        and is_on(tool, groups)
    ]


def capability_notes(tools: list[Tool]) -> str:
    lines = [f"- {tool.note}" for tool in tools if tool.note]
    if not lines:
        return ""
    return "## What you can do right now\n" + "\n".join(lines)


def switch_phase(session: Session, conversation_id: int, phase: str) -> None:
    """The set_phase tool's write, handed to it by the loop (tools know no chat models)."""
    from app.chat.models import Conversation

    conversation = session.get(Conversation, conversation_id)
    if conversation is not None:  # else deleted under the call: nothing to switch
        conversation.tool_phase = phase


def widen_to_build(session: Session, conversation_id: int) -> None:
    """A build tool called in discovery widens the conversation to build (the model
    asked for it by name; refusing would only make it guess again)."""
    from sqlalchemy import update

    from app.chat.models import Conversation

    session.execute(
        update(Conversation)
        .where(Conversation.id == conversation_id, Conversation.tool_phase == "discovery")
        .values(tool_phase="build")
    )
