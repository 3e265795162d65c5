"""Action tools: they do something (save, generate, start) and report back."""

from __future__ import annotations

from app.tools.registry import ToolRegistry

REGISTRY = ToolRegistry()
