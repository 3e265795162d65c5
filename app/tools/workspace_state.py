"""Tools on the conversation and the person rather than the workspace: switch the
conversation's tool phase, and remember (or forget) what the person asks to be kept."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from app.memory.store import (
    MemoryRefused,
    Operation,
    apply_operations,
    fallback_operations,
    mark_facts,
    reconcile,
)
from app.row_meta import HeldDetails
from app.tools.context import ToolContext
from app.tools.groups import ALWAYS_ON
from app.tools.registry import ACTION, ToolInput, ToolRegistry
from app.tools.results import ToolFailure

REGISTRY = ToolRegistry(group=ALWAYS_ON)


class PhaseInput(ToolInput):
    # Sent as a bare enum, as it always was.
    phase: Annotated[
        Literal["discovery", "build"], WithJsonSchema({"enum": ["discovery", "build"]})
    ]


class RememberInput(ToolInput):
    instruction: str = Field(min_length=1, max_length=2000)


def _writes_phase(args: dict[str, Any]) -> bool:
    # Back to discovery removes tools; only the switch to build adds the ones that write.
    return args.get("phase") == "build"


@REGISTRY.tool(
    name="set_phase",
    description=(
        "Switch this conversation's phase. In discovery you can look things up, ask and write "
        "copy; the tools that save, generate or start things (characters, images, storyboards, "
        "campaigns...) appear only in build. Switch to build as soon as the person wants something "
        "saved, generated or started; back to discovery when they are exploring."
    ),
    note=(
        "set_phase: call it with phase build to get the tools that save, generate or start things "
        "(characters, cast lists, images, storyboards, element sheets, campaigns)."
    ),
    category=ACTION,
    input=PhaseInput,
    phase="discovery",
    needs_approval_for=_writes_phase,
    label="Switched the chat's phase",
)
def set_phase(ctx: ToolContext, args: PhaseInput) -> dict[str, Any]:
    if ctx.switch_phase is None:
        raise ToolFailure("This conversation has no phase to switch.")
    ctx.switch_phase(args.phase)
    return {
        "phase": args.phase,
        "note": "The tools for this phase are available from your next step.",
    }


def exact_memory_operations(instruction: str) -> list[Operation]:
    """What a remember call from a tainted conversation saves: the instruction's facts
    read by fixed rules (no model rewrites them), so the card shows exactly these."""
    try:
        return fallback_operations(instruction)
    except MemoryRefused:
        return []


def _memory_card(args: dict[str, Any]) -> HeldDetails:
    operations = exact_memory_operations(str(args.get("instruction", "")))
    return {
        "memory": [
            {"op": operation.op, "fact": operation.fact, "newFact": operation.new_fact}
            for operation in operations
        ]
    }


@REGISTRY.tool(
    name="remember",
    description=(
        "Remember (or forget) something about the person for every future conversation, e.g. "
        '"remember that I prefer short headlines". Use it ONLY when the person explicitly asks you '
        "to remember or forget something; never on your own initiative."
    ),
    note="remember: save or forget what the person explicitly asks you to remember.",
    category=ACTION,
    input=RememberInput,
    phase="discovery",
    held_details=_memory_card,
    label="Updated your memory",
)
def remember(ctx: ToolContext, args: RememberInput) -> dict[str, Any]:
    if ctx.tainted:
        return _remember_exactly(ctx, args.instruction)
    try:
        outcome = reconcile(
            ctx.session,
            ctx.services.model,
            ctx.settings.fast_model,
            ctx.user_id,
            args.instruction,
            source="tool",
            actor_id=ctx.user_id,
        )
    except MemoryRefused as refusal:
        raise ToolFailure(str(refusal)) from refusal
    return {"remembered_facts": outcome.facts, "changes": outcome.changes}


def _remember_exactly(ctx: ToolContext, instruction: str) -> dict[str, Any]:
    """The approved card's facts, as shown, marked as from untrusted content."""
    operations = exact_memory_operations(instruction)
    if not operations:
        raise ToolFailure("There is nothing to remember in that instruction.")
    try:
        outcome = apply_operations(
            ctx.session, ctx.user_id, operations, source="tool", actor_id=ctx.user_id
        )
    except MemoryRefused as refusal:
        raise ToolFailure(str(refusal)) from refusal
    saved = [change["replaced_by"] or change["fact"] for change in outcome.changes]
    kept = [fact for fact in saved if fact in outcome.facts]
    mark_facts(ctx.session, ctx.user_id, kept, ctx.untrusted_sources)
    return {"remembered_facts": outcome.facts, "changes": outcome.changes}
