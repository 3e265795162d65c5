"""The process's tool registry: every category module's declarations plus one agent tool
per agent file."""

from __future__ import annotations

from app.agents.catalog import AgentCatalog
from app.tools import (
    campaigns,
    characters,
    images,
    outside_content,
    project_choice,
    read,
    sheets,
    ui,
    workspace_state,
)
from app.tools.agent import agent_tools
from app.tools.registry import ToolRegistry

# In this order the model sees them: lookups, cards, then what writes.
TOOL_MODULES = (
    read,
    outside_content,
    ui,
    project_choice,
    characters,
    sheets,
    campaigns,
    images,
    workspace_state,
)


def build_registry(agents: AgentCatalog) -> ToolRegistry:
    registry = ToolRegistry()
    for module in TOOL_MODULES:
        for declared in module.REGISTRY.all():
            registry.add(declared)
    for declared in agent_tools(agents):
        registry.add(declared)
    return registry
