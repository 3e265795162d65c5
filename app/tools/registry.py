"""A tool is declared once, with `tool(...)` (or `@REGISTRY.tool(...)` on its handler);
what the model sees, gating and billing derive from that. docs/architecture.md, "Adding
a tool", says how.

The transaction contract, kept by every tool and everything a tool calls: no database
transaction is open across a model call or an outbound HTTP call (agents, the fast-model
actions, memory reconcile, image providers, fetching a page, onboarding research). On
SQLite even a read holds the database's single write lock, so one slow call would stop
every other writer. A slow tool reads, ends its transaction (`ToolContext.end_reads`),
does the slow work, then writes in a new transaction, which the loop commits together
with the tool's result rows (`app.tools.invoke` rolls it back on failure).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict, TypeVar, Unpack

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict

from app.row_meta import Card, HeldDetails

if TYPE_CHECKING:
    from app.tools.context import ToolContext
    from app.tools.results import Pause, ToolResult

Category = Literal["read", "ui", "action", "agent"]
Phase = Literal["discovery", "build"]

# What a handler may return: a result, a card (Pause), or content the model reads.
Outcome: TypeAlias = "ToolResult | Pause | dict[str, Any] | str"
# A handler takes its tool's input model (a plain dict for a tool built without one).
Handler: TypeAlias = Callable[["ToolContext", Any], Outcome]
# An approved call's handler takes the card's exact arguments.
ApprovedHandler: TypeAlias = Callable[["ToolContext", dict[str, Any]], Outcome]
ResponseCheck = Callable[["ToolContext", Card, Any], str | None]


class ToolInput(BaseModel):
    """The base of every tool's input model: its fields are the input schema the model
    is sent (see `input_schema`), and the handler gets an instance. Unknown properties
    are refused; an optional property is `X | None = None` (absent, never null)."""

    model_config = ConfigDict(extra="forbid")


class NoInput(ToolInput):
    """The input of a tool that takes none."""


M = TypeVar("M", bound=ToolInput)


def _cleaned(node: Any, defs: dict[str, Any]) -> Any:
    """Pydantic's JSON schema as a hand-written one reads: no titles or defaults, nested
    models inlined, an optional property as its own type (absent, not null)."""
    if isinstance(node, list):
        return [_cleaned(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        node = {
            **defs[node["$ref"].rsplit("/", 1)[-1]],
            **{k: v for k, v in node.items() if k != "$ref"},
        }
    options = node.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options and len(options) == 2:
        (kept,) = [option for option in options if option != {"type": "null"}]
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        node = {**_cleaned(kept, defs), **rest}
    cleaned: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "default", "$defs"):
            continue
        if key == "properties":
            cleaned[key] = {name: _cleaned(sub, defs) for name, sub in value.items()}
        else:
            cleaned[key] = _cleaned(value, defs)
    return cleaned


def input_schema(model: type[ToolInput]) -> dict[str, Any]:
    """The input schema the model is sent for a tool whose input is `model`."""
    generated = model.model_json_schema()
    body = _cleaned(generated, generated.get("$defs") or {})
    return {
        "type": "object",
        "properties": body.get("properties") or {},
        "required": list(body.get("required") or []),
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Preset:
    """A category with the defaults its tools share (`tool(category=ACTION)`)."""

    category: Category
    phase: Phase = "discovery"
    needs_approval_when_tainted: bool = False
    untrusted: bool = False
    billable: bool = False


# Instant lookups in the person's workspace.
READ = Preset("read")
# Lookups of outside content (a file, a web page): their results taint the conversation.
OUTSIDE = Preset("read", untrusted=True)
# Cards that pause the run and ask the person.
UI = Preset("ui")
# What writes: offered in the build phase, held in a tainted conversation.
ACTION = Preset("action", phase="build", needs_approval_when_tainted=True)
# A sub-agent that writes and saves an output.
AGENT = Preset("agent", needs_approval_when_tainted=True, billable=True)


class ToolOptions(TypedDict, total=False):
    """What a declaration may add to its preset (see `Tool` for each)."""

    note: str | None
    label: str
    phase: Phase
    billable: bool
    fetches_url: bool
    needs_approval_for: Callable[[dict[str, Any]], bool] | None
    held_details: Callable[[dict[str, Any]], HeldDetails] | None
    check_response: ResponseCheck | None
    on_approved: ApprovedHandler | None


def tool(
    *,
    name: str,
    description: str,
    category: Preset,
    input: type[M],
    handler: Callable[[ToolContext, M], Outcome],
    **options: Unpack[ToolOptions],
) -> Tool:
    """The one way to declare a tool: its category's preset, its input model (the schema
    the model is sent, the handler's typed arguments), and what differs from the preset."""
    return Tool(
        name=name,
        description=description,
        input_schema=input_schema(input),
        category=category.category,
        handler=handler,
        input_model=input,
        phase=options.get("phase", category.phase),
        needs_approval_when_tainted=category.needs_approval_when_tainted,
        needs_approval_for=options.get("needs_approval_for"),
        held_details=options.get("held_details"),
        untrusted=category.untrusted,
        billable=options.get("billable", category.billable),
        fetches_url=options.get("fetches_url", False),
        check_response=options.get("check_response"),
        note=options.get("note"),
        on_approved=options.get("on_approved"),
        label=options.get("label", ""),
    )


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    category: Category
    handler: Handler
    # The handler's typed arguments; the input schema is made from it (`input_schema`).
    input_model: type[ToolInput] | None = None
    phase: Phase = "discovery"
    # The tool changes something (saves, generates, starts, remembers, links): in a
    # tainted conversation each call waits for the person's approval (app/chat/taint.py).
    needs_approval_when_tainted: bool = False
    # For such a tool whose calls change something only for some arguments: False means
    # this call changes nothing the gate protects (set_phase back to discovery).
    needs_approval_for: Callable[[dict[str, Any]], bool] | None = None
    # What a held call's card shows besides its arguments, e.g. remember's exact facts.
    held_details: Callable[[dict[str, Any]], HeldDetails] | None = None
    # Its results are untrusted content (a fetched page, an attached file).
    untrusted: bool = False
    billable: bool = False
    # It fetches the URL in its `url` argument: in a tainted conversation an address the
    # person did not type waits for their approval (app/chat/taint.py).
    fetches_url: bool = False
    # UI tools: checks a posted answer before it resumes the run; returns an error or None.
    check_response: ResponseCheck | None = None
    # One line for the system prompt's capability notes; None means not advertised.
    note: str | None = None
    # A tool that pauses on a confirmation card: what runs, with the card's exact
    # arguments, once the person approves.
    on_approved: ApprovedHandler | None = None
    # What a run's steps call it, in plain words ("Looked up your offers"); empty: made
    # from the name ("List offers").
    label: str = ""

    def call_needs_approval(self, arguments: dict[str, Any]) -> bool:
        """Whether this call changes something, so a tainted conversation holds it."""
        if not self.needs_approval_when_tainted:
            return False
        return self.needs_approval_for is None or bool(self.needs_approval_for(arguments))

    @property
    def step_label(self) -> str:
        return self.label or " ".join(self.name.split("_")).capitalize()

    @property
    def held_question(self) -> str:
        """What a card holding this call for the person's approval asks, in the same
        plain words as the run's step: "Saved a campaign" asks "Save this campaign?"."""
        return held_question(self.step_label)

    def schema_for_model(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def typed(self, arguments: dict[str, Any]) -> Any:
        """The handler's arguments: checked arguments as the tool's input model."""
        if self.input_model is None:
            return arguments
        return self.input_model.model_validate(arguments)

    def checked_input(self, arguments: Any) -> CheckedInput:
        """The arguments with quoted scalars coerced where the schema wants a number or a
        boolean (models send "12" for 12), then checked strictly."""
        coerced: list[str] = []
        if isinstance(arguments, dict):
            arguments = coerce_scalars(self.input_schema, arguments, "", coerced)
        return CheckedInput(arguments, self.validation_error(arguments), tuple(coerced))

    def validation_error(self, arguments: Any) -> str | None:
        if not isinstance(arguments, dict):
            return "Tool input must be a JSON object."
        errors = sorted(Draft202012Validator(self.input_schema).iter_errors(arguments), key=str)
        if not errors:
            return None
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "input"
        return f"Invalid input for {self.name} at {where}: {first.message}"


# The verbs a step label starts with, as a held call's question asks them (the label says
# what was done; the card asks whether to do it).
ASKED_VERBS = {
    "Asked": "Ask",
    "Checked": "Check",
    "Linked": "Link",
    "Looked": "Look",
    "Made": "Make",
    "Proposed": "Propose",
    "Read": "Read",
    "Saved": "Save",
    "Started": "Start",
    "Switched": "Switch",
    "Updated": "Update",
    "Wrote": "Write",
}
FALLBACK_QUESTION = "Allow this step: {label}?"


def held_question(label: str) -> str:
    """A step label as the question of a card that holds it: its verb asked, and "a"
    thing become "this" thing, the one the card shows ("Made an image": "Make this
    image?"); a label of another verb is asked whole."""
    verb, _, rest = label.partition(" ")
    asked = ASKED_VERBS.get(verb)
    if asked is None or not rest:
        return FALLBACK_QUESTION.format(label=label)
    article, _, thing = rest.partition(" ")
    if article in ("a", "an") and thing:
        rest = f"this {thing}"
    return f"{asked} {rest}?"


@dataclass(frozen=True)
class CheckedInput:
    arguments: Any
    problem: str | None
    coerced: tuple[str, ...] = ()  # the paths whose quoted value was taken as a number


INTEGER = re.compile(r"^\s*[-+]?\d+\s*$")
NUMBER = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")
BOOLEANS = {"true": True, "false": False}


def _types(schema: dict[str, Any]) -> set[str]:
    declared = schema.get("type")
    return set(declared) if isinstance(declared, list) else {declared} if declared else set()


def _coerce_scalar(types: set[str], value: Any) -> Any:
    """Lax mode, as pydantic's: "12" or 12.0 for an integer, "1.5" for a number,
    "true"/"false" for a boolean. Anything else is left for the strict check to refuse."""
    if "string" in types or isinstance(value, bool):
        return value
    if "integer" in types:
        if isinstance(value, str) and INTEGER.match(value):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
    if "number" in types and isinstance(value, str) and NUMBER.match(value):
        number = float(value)
        return int(number) if number.is_integer() and "." not in value else number
    if "boolean" in types and isinstance(value, str) and value.strip().lower() in BOOLEANS:
        return BOOLEANS[value.strip().lower()]
    return value


def coerce_scalars(schema: dict[str, Any], value: Any, path: str, coerced: list[str]) -> Any:
    """A copy of `value` with scalars coerced where `schema` asks for a number or a
    boolean; `coerced` collects the paths that changed."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        return {
            key: coerce_scalars(properties.get(key) or {}, item, f"{path}/{key}", coerced)
            for key, item in value.items()
        }
    if isinstance(value, list):
        items = schema.get("items") or {}
        return [
            coerce_scalars(items, item, f"{path}/{index}", coerced)
            for index, item in enumerate(value)
        ]
    result = _coerce_scalar(_types(schema), value)
    if result is not value:
        coerced.append(path.lstrip("/") or "input")
    return result


@lru_cache(maxsize=512)
def _check_schema(schema_json: str) -> None:
    """Schemas are constants: check each one once per process, not once per app."""
    Draft202012Validator.check_schema(json.loads(schema_json))


class ToolRegistry:
    """Tools by name, in the order they were added (the order the model sees them)."""

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

    def tool(
        self,
        *,
        name: str,
        description: str,
        category: Preset,
        input: type[M],
        **options: Unpack[ToolOptions],
    ) -> Callable[[Callable[[ToolContext, M], Outcome]], Callable[[ToolContext, M], Outcome]]:
        """`tool(...)` on the handler it decorates, added to this registry:

        @REGISTRY.tool(name="get_offer", description="...", category=READ, input=OfferInput)
        def get_offer(ctx: ToolContext, args: OfferInput) -> dict[str, Any]: ...
        """

        def decorate(
            handler: Callable[[ToolContext, M], Outcome],
        ) -> Callable[[ToolContext, M], Outcome]:
            self.add(
                tool(
                    name=name,
                    description=description,
                    category=category,
                    input=input,
                    handler=handler,
                    **options,
                )
            )
            return handler

        return decorate
