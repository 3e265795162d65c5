"""Agent tools: one per agent file; each runs a sub-agent that writes copy."""

from __future__ import annotations

from app.agents.catalog import AgentCatalog, AgentDefinition
from app.agents.runner import run_agent
from app.tools.registry import Tool

AGENT_INPUT = {
    "type": "object",
    "properties": {
        "instructions": {
            "type": "string",
            "minLength": 1,
            "maxLength": 8000,
            "description": "What to write, for whom, and anything to keep or change.",
        },
        "offer_id": {"type": "integer", "description": "The offer this is for."},
        "persona_id": {"type": "integer", "description": "The persona to write for."},
        "reference_output_ids": {
            "type": "array",
            "items": {"type": "integer"},
            "maxItems": 5,
            "description": "Saved outputs (from any offer) to adapt or stay consistent with.",
        },
    },
    "required": ["instructions"],
    "additionalProperties": False,
}


def _agent_tool(agent: AgentDefinition) -> Tool:
    return Tool(
        name=agent.tool_name,
        description=agent.description,
        input_schema=AGENT_INPUT,
        category="agent",
        handler=lambda ctx, args: run_agent(ctx, agent, args),
        # An agent saves what it writes as an output: a writing tool for the taint gate.
        read_only=False,
        billable=True,
        note=f"{agent.tool_name}: {agent.description}",
        label=agent.step_label,
    )


def agent_tools(catalog: AgentCatalog) -> list[Tool]:
    return [_agent_tool(agent) for agent in catalog]
