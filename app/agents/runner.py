"""Runs one agent for the host: its prompt, the workspace context it was given, its answer
as a forced tool call whose schema is the agent's output schema (streamed to the timeline
only). Knows no tool types: `app.tools.agent` resolves the ids, saves the result and
turns `AgentFailed` into a tool failure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.agents.catalog import AgentDefinition
from app.agents.guidelines import append_guidelines, current_rules, guidelines_from_file
from app.agents.outputs import AgentFailed, Writer, answer_tool_name, write_structured
from app.config import Settings
from app.llm.budget import estimate_text, input_budget, truncate_text
from app.llm.structured import StructuredOutputFailed
from app.memory.store import read_memory
from app.workspace.models import Offer, Output, Persona


@dataclass(frozen=True)
class AgentBrief:
    """What the host asked an agent for, with the workspace objects it named (the
    caller's own, already checked)."""

    instructions: str
    offer: Offer | None = None
    persona: Persona | None = None
    references: list[Output] = field(default_factory=list)


def agent_system_prompt(agent: AgentDefinition, session: Session | None = None) -> str:
    """The agent's prompt plus the shared guidelines as they are in the database now (an
    admin's edit applies to the next run). Without a session: the seed file's rules."""
    rules = guidelines_from_file() if session is None else current_rules(session)
    return append_guidelines(agent.prompt, rules)


def _as_json(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False)


def _context_message(session: Session, user_id: int, brief: AgentBrief) -> str:
    parts = [f"## Instructions from the host\n{brief.instructions}"]
    personal, _ = read_memory(session, user_id)
    if personal.strip():
        parts.append(f"## The person's own standing instructions\n{personal.strip()}")
    if (offer := brief.offer) is not None:
        parts.append("## Offer\n" + _as_json(offer.as_dict()))
    if (persona := brief.persona) is not None:
        facts = {
            "name": persona.name,
            "description": persona.description,
            "pains": persona.pains,
            "goals": persona.goals,
        }
        parts.append("## Persona\n" + _as_json(facts))
    for reference in brief.references:
        parts.append(
            f"## Reference output {reference.id} ({reference.agent}: {reference.title})\n"
            + _as_json(reference.content)
        )
    return "\n\n".join(parts)


def agent_tool_input_note(agent: AgentDefinition) -> str:
    return (
        f"Give the whole result as the input of the {answer_tool_name(agent.name)} tool; "
        "its schema is the exact shape to follow."
    )


def run_agent(
    session: Session,
    *,
    user_id: int,
    settings: Settings,
    writer: Writer,
    agent: AgentDefinition,
    brief: AgentBrief,
) -> dict[str, Any]:
    """The agent's result, valid against its output schema; AgentFailed when the model
    never writes one."""
    # Every read first (the current guidelines too, so an admin's edit applies to the next
    # run); `write_structured` then ends the transaction before the model writes, and the
    # caller saves the Output in a new one.
    user_message = _context_message(session, user_id, brief)
    system = agent_system_prompt(agent, session)
    budget = input_budget(
        settings.context_window_tokens, agent.max_tokens, 0, estimate_text(system)
    )
    note = agent_tool_input_note(agent)
    user_message = truncate_text(user_message, budget - estimate_text(note)) + "\n\n" + note
    try:
        return write_structured(
            writer,
            name=agent.name,
            model=settings.host_model if agent.tier == "host" else settings.fast_model,
            system=system,
            user_message=user_message,
            schema=agent.output_schema,
            max_tokens=agent.max_tokens,
        )
    except StructuredOutputFailed as failed:
        raise AgentFailed(
            f"The {agent.name} agent did not produce a valid result: {failed}"
        ) from failed
