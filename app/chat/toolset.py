"""Which tools a step offers, computed in one place; the capability notes in the system
prompt are derived from the same list, so the prompt never promises a missing tool."""

from __future__ import annotations

from app.tools.registry import Tool, ToolRegistry


def tools_for_step(registry: ToolRegistry, phase: str) -> list[Tool]:
    return [tool for tool in registry.all() if tool.phase == "discovery" or phase == "build"]


def capability_notes(tools: list[Tool]) -> str:
    lines = [f"- {tool.note}" for tool in tools if tool.note]
    if not lines:
        return ""
    return "## What you can do right now\n" + "\n".join(lines)
