"""The process's tool registry: every category module's declarations plus one agent tool
per agent file."""

from __future__ import annotations

from app.agents.catalog import AgentCatalog
from app.tools import action, outside_content, read, ui
from app.tools.agent import agent_tools
from app.tools.registry import ToolRegistry


def build_registry(agents: AgentCatalog) -> ToolRegistry:
    registry = ToolRegistry()
    for module in (read, outside_content, ui, action):
        for declared in module.REGISTRY.all():
            registry.add(declared)
    for declared in agent_tools(agents):
        registry.add(declared)
    return registry
