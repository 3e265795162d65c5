"""Runs one agent for the host: its prompt, the workspace context it was given, its answer
as a forced tool call whose schema is the agent's output schema (streamed to the timeline
only), saved as an Output."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.orm import Session

from app.agents.catalog import AgentDefinition
from app.agents.guidelines import append_guidelines, current_rules, guidelines_from_file
from app.agents.outputs import answer_tool_name, saved_output, write_structured
from app.chat.budget import estimate_text, input_budget, truncate_text
from app.llm.structured import StructuredOutputFailed
from app.memory.store import read_memory
from app.tools.context import ToolContext
from app.tools.registry import ToolFailure, ToolResult
from app.workspace.models import Offer, Output, Persona


def agent_system_prompt(agent: AgentDefinition, session: Session | None = None) -> str:
    """The agent's prompt plus the shared guidelines as they are in the database now (an
    admin's edit applies to the next run). Without a session: the seed file's rules."""
    rules = guidelines_from_file() if session is None else current_rules(session)
    return append_guidelines(agent.prompt, rules)


def _context_message(ctx: ToolContext, args: dict[str, Any]) -> tuple[str, Offer | None]:
    parts = [f"## Instructions from the host\n{args['instructions']}"]
    personal, _ = read_memory(ctx.session, ctx.user_id)
    if personal.strip():
        parts.append(f"## The person's own standing instructions\n{personal.strip()}")
    offer = None
    if args.get("offer_id") is not None:
        offer = ctx.owned(Offer, args["offer_id"], "offer")
        parts.append(
            "## Offer\n"
            + json.dumps(
                {
                    "id": offer.id,
                    "name": offer.name,
                    "description": offer.description,
                    "audience": offer.audience,
                    "price": offer.price,
                    "brand_colors": offer.brand_colors,
                },
                ensure_ascii=False,
            )
        )
    if args.get("persona_id") is not None:
        persona = ctx.owned(Persona, args["persona_id"], "persona")
        parts.append(
            "## Persona\n"
            + json.dumps(
                {
                    "name": persona.name,
                    "description": persona.description,
                    "pains": persona.pains,
                    "goals": persona.goals,
                },
                ensure_ascii=False,
            )
        )
    for output_id in args.get("reference_output_ids") or []:
        reference = ctx.saw(ctx.owned(Output, output_id, "output"))
        parts.append(
            f"## Reference output {reference.id} ({reference.agent}: {reference.title})\n"
            + json.dumps(reference.content, ensure_ascii=False)
        )
    return "\n\n".join(parts), offer


def agent_tool_input_note(agent: AgentDefinition) -> str:
    return (
        f"Give the whole result as the input of the {answer_tool_name(agent.name)} tool; "
        "its schema is the exact shape to follow."
    )


def run_agent(ctx: ToolContext, agent: AgentDefinition, args: dict[str, Any]) -> ToolResult:
    # Every read first (the current guidelines too, so an admin's edit applies to the next
    # run); `write_structured` then ends the transaction before the model writes, and the
    # Output is saved in a new one with the tool's result.
    user_message, offer = _context_message(ctx, args)
    system = agent_system_prompt(agent, ctx.session)
    settings = ctx.settings
    budget = input_budget(
        settings.context_window_tokens, agent.max_tokens, 0, estimate_text(system)
    )
    note = agent_tool_input_note(agent)
    user_message = truncate_text(user_message, budget - estimate_text(note)) + "\n\n" + note
    try:
        output = write_structured(
            ctx,
            name=agent.name,
            model=settings.host_model if agent.tier == "host" else settings.fast_model,
            system=system,
            user_message=user_message,
            schema=agent.output_schema,
            max_tokens=agent.max_tokens,
        )
    except StructuredOutputFailed as failed:
        raise ToolFailure(
            f"The {agent.name} agent did not produce a valid result: {failed}"
        ) from failed
    return saved_output(ctx, agent.slug, agent.name, output, offer, agent.title_field)
