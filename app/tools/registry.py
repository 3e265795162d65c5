"""A tool is declared once; what the model sees, gating and billing derive from that."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from jsonschema import Draft202012Validator

if TYPE_CHECKING:
    from app.tools.context import ToolContext

Category = Literal["read", "ui", "action", "agent"]
Phase = Literal["discovery", "build"]


class ToolFailure(Exception):
    """A failure the model should see as an `is_error` tool result (never crashes a run)."""


@dataclass
class ToolResult:
    content: Any
    is_error: bool = False
    # Rows the tool wants shown in the chat besides its (hidden) result, e.g. an image.
    visible_rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Pause:
    """A UI tool's answer: stop the run and show this card until the person answers."""

    card: dict[str, Any]


def confirmation(arguments: dict[str, Any], reason: str, title: str) -> Pause:
    """Hold a call until the person approves exactly these arguments."""
    return Pause(
        {
            "kind": "confirmation",
            "title": title,
            "arguments": arguments,
            "reason": reason,
            "steps": [],
        }
    )


Handler = Callable[["ToolContext", dict[str, Any]], "ToolResult | Pause | Any"]
ResponseCheck = Callable[["ToolContext", dict[str, Any], dict[str, Any]], str | None]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    category: Category
    handler: Handler
    phase: Phase = "discovery"
    read_only: bool = True
    untrusted: bool = False
    billable: bool = False
    # UI tools: checks a posted answer before it resumes the run; returns an error or None.
    check_response: ResponseCheck | None = None
    # One line for the system prompt's capability notes; None means not advertised.
    note: str | None = None
    # A tool that pauses on a confirmation card: what runs, with the card's exact
    # arguments, once the person approves.
    on_approved: Handler | None = None

    def schema_for_model(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def validation_error(self, arguments: Any) -> str | None:
        if not isinstance(arguments, dict):
            return "Tool input must be a JSON object."
        errors = sorted(Draft202012Validator(self.input_schema).iter_errors(arguments), key=str)
        if not errors:
            return None
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "input"
        return f"Invalid input for {self.name} at {where}: {first.message}"


@lru_cache(maxsize=512)
def _check_schema(schema_json: str) -> None:
    """Schemas are constants: check each one once per process, not once per app."""
    Draft202012Validator.check_schema(json.loads(schema_json))


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name} declared twice")
        _check_schema(json.dumps(tool.input_schema, sort_keys=True))
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def all(self) -> list[Tool]:
        return list(self._tools.values())

    def by_category(self, category: Category) -> list[Tool]:
        return [tool for tool in self._tools.values() if tool.category == category]

    def __contains__(self, name: str) -> bool:
        return name in self._tools


def tool(
    registry: ToolRegistry,
    *,
    name: str,
    description: str,
    category: Category,
    properties: dict[str, Any] | None = None,
    required: tuple[str, ...] = (),
    **options: Any,
) -> Callable[[Handler], Handler]:
    """Declare a tool on its handler:

    @tool(REGISTRY, name="get_offer", description="...", category="read",
          properties={"offer_id": {"type": "integer"}}, required=("offer_id",))
    def get_offer(ctx, args): ...
    """

    def decorate(handler: Handler) -> Handler:
        schema = {
            "type": "object",
            "properties": properties or {},
            "required": list(required),
            "additionalProperties": False,
        }
        registry.add(
            Tool(
                name=name,
                description=description,
                input_schema=schema,
                category=category,
                handler=handler,
                **options,
            )
        )
        return handler

    return decorate
