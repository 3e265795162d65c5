"""Agent tools (one per agent file; each runs a sub-agent that writes copy), and the
bridge every tool that has a model write a structured result crosses: the agents'
results and failures become tool results and tool failures here."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from app.agents.catalog import AgentCatalog, AgentDefinition
from app.agents.outputs import AgentFailed, fast_structured_output, save_output
from app.agents.runner import AgentBrief, run_agent
from app.kinds import RowKind
from app.tools.context import ToolContext
from app.tools.groups import WRITING
from app.tools.registry import AGENT, Integer, Tool, ToolInput, tool
from app.tools.results import ToolFailure, ToolResult
from app.workspace.models import Offer, Output, Persona


class AgentInput(ToolInput):
    """What every agent tool takes: the host's request and the ids it is about."""

    instructions: str = Field(
        min_length=1,
        max_length=8000,
        description="What to write, for whom, and anything to keep or change.",
    )
    offer_id: Integer | None = Field(None, description="The offer this is for.")
    persona_id: Integer | None = Field(None, description="The persona to write for.")
    reference_output_ids: list[Integer] | None = Field(
        None,
        max_length=5,
        description="Saved outputs (from any offer) to adapt or stay consistent with.",
    )


def output_result(
    ctx: ToolContext,
    slug: str,
    name: str,
    output: dict[str, Any],
    offer: Offer | None,
    title_field: str = "title",
) -> ToolResult:
    """Save a structured result as an Output and show it in the chat like an agent's."""
    saved = save_output(
        ctx.session,
        user_id=ctx.user_id,
        project_id=ctx.project_id,
        conversation_id=ctx.conversation_id,
        slug=slug,
        name=name,
        output=output,
        offer=offer,
        title_field=title_field,
    )
    return ToolResult(
        content={
            "output_id": saved.output_id,
            "agent": slug,
            "title": saved.title,
            "output": output,
        },
        visible_rows=[
            {"kind": RowKind.AGENT_OUTPUT, "content": "", "meta": {"agentOutput": saved.shown}}
        ],
    )


def fast_output(
    ctx: ToolContext, name: str, system: str, user_message: str, schema: dict[str, Any]
) -> dict[str, Any]:
    """The fast model's answer for a build tool; a tool failure when it never complies."""
    try:
        return fast_structured_output(
            ctx.session,
            ctx.writer(),
            model=ctx.settings.fast_model,
            name=name,
            system=system,
            user_message=user_message,
            schema=schema,
        )
    except AgentFailed as failed:
        raise ToolFailure(str(failed)) from failed


def _brief(ctx: ToolContext, args: AgentInput) -> AgentBrief:
    """The host's request with its ids checked to be the caller's."""
    offer = persona = None
    if args.offer_id is not None:
        offer = ctx.owned(Offer, args.offer_id, "offer")
    if args.persona_id is not None:
        persona = ctx.owned(Persona, args.persona_id, "persona")
    references = [
        ctx.saw(ctx.owned(Output, output_id, "output"))
        for output_id in args.reference_output_ids or []
    ]
    return AgentBrief(args.instructions, offer, persona, references)


def run_agent_tool(ctx: ToolContext, agent: AgentDefinition, args: AgentInput) -> ToolResult:
    brief = _brief(ctx, args)
    try:
        output = run_agent(
            ctx.session,
            user_id=ctx.user_id,
            settings=ctx.settings,
            writer=ctx.writer(),
            agent=agent,
            brief=brief,
        )
    except AgentFailed as failed:
        raise ToolFailure(str(failed)) from failed
    return output_result(ctx, agent.slug, agent.name, output, brief.offer, agent.title_field)


def _agent_tool(agent: AgentDefinition) -> Tool:
    # An agent saves what it writes as an output: held in a tainted conversation.
    return tool(
        name=agent.tool_name,
        description=agent.description,
        category=AGENT,
        input=AgentInput,
        handler=lambda ctx, args: run_agent_tool(ctx, agent, args),
        note=f"{agent.tool_name}: {agent.description}",
        label=agent.step_label,
        group=WRITING,
    )


def agent_tools(catalog: AgentCatalog) -> list[Tool]:
    return [_agent_tool(agent) for agent in catalog]
