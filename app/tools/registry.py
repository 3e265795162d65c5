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
from collections.abc import Callable
from dataclasses import InitVar, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, TypedDict, TypeVar, Unpack

from jsonschema import Draft202012Validator
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
)
from pydantic_core import PydanticCustomError

from app.row_meta import Card, HeldDetails
from app.tools.groups import ALWAYS_ON, ToolGroup
from app.tools.held_questions import held_question

if TYPE_CHECKING:
    from app.tools.context import ToolContext
    from app.tools.results import Pause, ToolResult

Category = Literal["read", "ui", "action", "agent"]
Phase = Literal["discovery", "build"]

# What a handler may return: a result, a card (Pause), or content the model reads.
Outcome: TypeAlias = "ToolResult | Pause | dict[str, Any] | str"
# A handler takes its tool's input model.
Handler: TypeAlias = Callable[["ToolContext", Any], Outcome]
# An approved call's handler takes the card's exact arguments.
ApprovedHandler: TypeAlias = Callable[["ToolContext", dict[str, Any]], Outcome]
ResponseCheck = Callable[["ToolContext", Card, Any], str | None]
# A tool that asked mid-call goes on with the answered card (an MCP server's question).
AnsweredHandler: TypeAlias = Callable[["ToolContext", Card], Outcome]


def _not_a_boolean(value: Any) -> Any:
    """Lax mode would take True as 1; a boolean is no number here."""
    if isinstance(value, bool):
        raise PydanticCustomError("number_type", "Input should be a number, not a boolean")
    return value


def _true_or_false(value: Any) -> Any:
    """Only "true" and "false" (any case) are taken as booleans, not "yes", "1" or 1."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


# The scalars of a tool's input, read in pydantic's lax mode (models send "12" for 12): an
# integer from "12" or 7.0 (not 1.5, nor True); a number from "1.5" (not True, nor "nan");
# a boolean from "true" or "false" only. Their schema is the plain type's. A bounded one
# puts its bounds before the validator, or pydantic would not send them as JSON Schema:
# `Annotated[int, Field(ge=1, le=6), NOT_A_BOOLEAN]` (`input_schema` refuses the other).
NOT_A_BOOLEAN = BeforeValidator(_not_a_boolean)
Integer = Annotated[int, NOT_A_BOOLEAN]
Number = Annotated[float, Field(allow_inf_nan=False), NOT_A_BOOLEAN]
Boolean = Annotated[bool, Strict(), BeforeValidator(_true_or_false)]


class ToolInput(BaseModel):
    """The base of every tool's input model: its fields are the input schema the model
    is sent (see `input_schema`), and the handler gets an instance. Unknown properties
    are refused; an optional property is `X | None = None` (absent, never null). A field
    that holds a number or a boolean is an `Integer`, `Number` or `Boolean`."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _never_null(cls, value: Any) -> Any:
        if value is None:
            raise PydanticCustomError("null", "Input should be left out rather than null")
        return value


class NoInput(ToolInput):
    """The input of a tool that takes none."""


M = TypeVar("M", bound=ToolInput)


# Bounds by pydantic's names, which its schema shows only for a bound it could not
# apply to the type itself (one after a validator).
PYDANTIC_BOUNDS = {"gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length"}


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
        if key in PYDANTIC_BOUNDS:
            raise TypeError(f"a bound ({key}) after a validator: see NOT_A_BOOLEAN")
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
# An outside server's tools (MCP): untrusted results, every call billed, held as a write
# while tainted unless someone approved the tool's read-only claim.
MCP = Preset("read", untrusted=True, billable=True, needs_approval_when_tainted=True)
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
    # An outside server's tool (input=OutsideInput): the server's own schema, which is
    # what the model is sent and what checks the arguments, and the server's name.
    schema: dict[str, Any]
    origin: str
    held_always: bool
    needs_approval_when_tainted: bool
    on_answered: AnsweredHandler | None
    # What a preset turns on or off with it (app/tools/groups.py); by default its module's.
    group: ToolGroup | None


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
    the model is sent, the handler's typed arguments), and what differs from the preset.
    An outside server's tool gives the server's `schema` instead of a model of ours."""
    schema = options.get("schema")
    return Tool(
        name=name,
        description=description,
        input_schema=input_schema(input) if schema is None else schema,
        input_check=None if schema is None else _schema_check(json.dumps(schema, sort_keys=True)),
        category=category.category,
        handler=handler,
        input_model=input,
        phase=options.get("phase", category.phase),
        needs_approval_when_tainted=options.get(
            "needs_approval_when_tainted", category.needs_approval_when_tainted
        ),
        held_always=options.get("held_always", False),
        on_answered=options.get("on_answered"),
        origin=options.get("origin", ""),
        needs_approval_for=options.get("needs_approval_for"),
        held_details=options.get("held_details"),
        untrusted=category.untrusted,
        billable=options.get("billable", category.billable),
        fetches_url=options.get("fetches_url", False),
        check_response=options.get("check_response"),
        note=options.get("note"),
        on_approved=options.get("on_approved"),
        label=options.get("label", ""),
        # A card that asks the person is never turned off.
        group=ALWAYS_ON if category.category == "ui" else options.get("group"),
        declared=_DECLARED,
    )


class OutsideInput(ToolInput):
    """An outside tool's arguments (an MCP server's tool): its schema is the server's, so
    the server's schema checks them (`tool(..., schema=...)`) and the handler reads them whole,
    `args.model_dump()`."""

    model_config = ConfigDict(extra="allow")


@lru_cache(maxsize=512)
def _schema_check(schema_json: str) -> Callable[[dict[str, Any]], str | None]:
    """The first problem the schema finds in some arguments, as a path and a message."""
    validator = Draft202012Validator(json.loads(schema_json))

    def check(arguments: dict[str, Any]) -> str | None:
        errors = sorted(validator.iter_errors(arguments), key=str)
        if not errors:
            return None
        where = "/".join(str(part) for part in errors[0].absolute_path) or "input"
        return f"{where}: {errors[0].message}"

    return check


# What only `tool()` passes: a Tool is declared, never built by hand.
_DECLARED = object()


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A declared tool (`tool(...)`); building one directly is refused."""

    name: str
    description: str
    input_schema: dict[str, Any]
    category: Category
    handler: Handler
    # The handler's typed arguments and the input check; the input schema is made from it.
    input_model: type[ToolInput]
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
    # Every call waits for the person's approval, tainted or not (an MCP server whose
    # policy is `always`).
    held_always: bool = False
    # The outside server it comes from (an MCP server's name); empty for our own tools.
    origin: str = ""
    # A tool whose call asked the person mid-way (a card it made itself, `resume` on it):
    # what goes on once they answered, in the resumed run.
    on_answered: AnsweredHandler | None = None
    # An outside tool's check of its arguments against the server's own schema (our own
    # tools' input models check theirs).
    input_check: Callable[[dict[str, Any]], str | None] | None = None
    # Its group, which a preset turns on or off (app/tools/groups.py).
    group: ToolGroup | None = None
    # `tool()`'s token: a Tool built any other way is refused.
    declared: InitVar[object] = None

    def __post_init__(self, declared: object) -> None:
        if declared is not _DECLARED:
            raise TypeError(f"declare {self.name} with tool(...), not Tool(...)")

    @property
    def writes(self) -> bool:
        """Whether the tool changes the project's workspace: its category says (actions
        and agents write; reads and cards do not). A viewer's chat may not call it."""
        return self.category in ("action", "agent")

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

    def typed(self, arguments: dict[str, Any]) -> ToolInput:
        """The handler's arguments: checked arguments as the tool's input model."""
        return self.input_model.model_validate(arguments)

    def checked_input(self, arguments: Any) -> CheckedInput:
        """The arguments as the input model reads them, in lax mode (models send "12" for
        12, see `Integer`), or the problem the model is told."""
        if not isinstance(arguments, dict):
            return CheckedInput(arguments, "Tool input must be a JSON object.")
        problem = self.input_check(arguments) if self.input_check else None
        if problem:
            return CheckedInput(arguments, f"Invalid input for {self.name} at {problem}")
        try:
            typed = self.typed(arguments)
        except ValidationError as invalid:
            return CheckedInput(arguments, invalid_input(self.name, invalid))
        checked = typed.model_dump(mode="json", exclude_unset=True)
        return CheckedInput(checked, None, tuple(_quoted_paths(arguments, checked, "")))


def invalid_input(name: str, invalid: ValidationError) -> str:
    """What the model is told about arguments its tool's input model refuses."""
    first = invalid.errors()[0]
    where = "/".join(str(part) for part in first["loc"]) or "input"
    return f"Invalid input for {name} at {where}: {first['msg']}"


def _quoted_paths(given: Any, checked: Any, path: str) -> list[str]:
    """Where a quoted value was taken as a number or a boolean ("12" as 12)."""
    if isinstance(given, dict) and isinstance(checked, dict):
        return [
            found
            for key, value in given.items()
            if key in checked
            for found in _quoted_paths(value, checked[key], f"{path}/{key}")
        ]
    if isinstance(given, list) and isinstance(checked, list):
        return [
            found
            for index, (value, taken) in enumerate(zip(given, checked, strict=False))
            for found in _quoted_paths(value, taken, f"{path}/{index}")
        ]
    if isinstance(given, str) and not isinstance(checked, str):
        return [path.lstrip("/") or "input"]
    return []


@dataclass(frozen=True)
class CheckedInput:
    arguments: Any
    problem: str | None
    coerced: tuple[str, ...] = ()  # where a quoted value was taken as a number or boolean


@lru_cache(maxsize=512)
def _check_schema(schema_json: str) -> None:
    """Schemas are constants: check each one once per process, not once per app."""
    Draft202012Validator.check_schema(json.loads(schema_json))


class ToolRegistry:
    """Tools by name, in the order they were added (the order the model sees them).
    `group`: the group of the tools declared on it (a subject module's registry)."""

    def __init__(self, group: ToolGroup | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self.group = group

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

    def extended(self, tools: list[Tool]) -> ToolRegistry:
        """A copy with `tools` added after these (a run's outside tools after ours); a name
        already taken is skipped, never replaced."""
        copy = ToolRegistry()
        copy._tools = dict(self._tools)
        for extra in tools:
            if extra.name not in copy._tools:
                copy.add(extra)
        return copy

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

        options.setdefault("group", self.group)

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
