"""Structured results the fast model writes for build tools, and saving any structured
result (an agent's or a fast action's) as an Output shown in the chat."""

from __future__ import annotations

from typing import Any

from app.agents.guidelines import append_guidelines, current_rules
from app.events import AgentToken, Timeline
from app.llm.structured import Shape, StructuredOutputFailed, structured_call
from app.tools.context import ToolContext
from app.tools.registry import ToolFailure, ToolResult
from app.workspace.models import Offer, Output

FAST_MAX_TOKENS = 4096


def answer_tool_name(name: str) -> str:
    """The forced tool a structured answer comes in: "Cast list" -> "submit_cast_list"."""
    words = "".join(c if c.isalnum() else " " for c in name.lower()).split()
    return "submit_" + "_".join(words)


def write_structured(
    ctx: ToolContext,
    *,
    name: str,
    model: str,
    system: str,
    user_message: str,
    schema: dict[str, Any],
    max_tokens: int,
) -> dict[str, Any]:
    """A model's answer in `schema` (a forced tool call), streamed to the timeline under
    `name` and never to the chat body. Ends the tool's read transaction first: no database
    transaction stays open across the model call."""
    ctx.end_reads()
    shape = Shape(
        answer_tool_name(name),
        f"Give the {name.lower()} as this tool's input: the input is the whole answer.",
        schema,
    )
    ctx.emit(Timeline(ctx.run_id, "writing", "started", agent=name))
    try:
        return structured_call(
            ctx.services.model,
            model_name=model,
            system=system,
            messages=[{"role": "user", "content": user_message}],
            shape=shape,
            max_tokens=max_tokens,
            on_progress=lambda text: ctx.emit(AgentToken(ctx.run_id, name, text)),
            should_stop=ctx.should_stop,
        )
    finally:
        ctx.emit(Timeline(ctx.run_id, "writing", "done", agent=name))


def fast_structured_output(
    ctx: ToolContext,
    name: str,
    system: str,
    user_message: str,
    schema: dict[str, Any],
    max_tokens: int = FAST_MAX_TOKENS,
) -> dict[str, Any]:
    """The fast model's answer for a build tool, with the shared guidelines as an admin
    left them (like the agents get them); a ToolFailure naming what was wrong when the
    model never complies."""
    system_prompt = append_guidelines(system, current_rules(ctx.session))
    try:
        return write_structured(
            ctx,
            name=name,
            model=ctx.settings.fast_model,
            system=system_prompt,
            user_message=user_message,
            schema=schema,
            max_tokens=max_tokens,
        )
    except StructuredOutputFailed as failed:
        raise ToolFailure(f"The {name.lower()} could not be produced: {failed}") from failed


def saved_output(
    ctx: ToolContext,
    slug: str,
    name: str,
    output: dict[str, Any],
    offer: Offer | None,
    title_field: str = "title",
) -> ToolResult:
    """Save a structured result as an Output and show it in the chat like an agent's."""
    title = str(output.get(title_field) or name)[:200]
    saved = Output(
        user_id=ctx.user_id,
        offer_id=offer.id if offer else None,
        conversation_id=ctx.conversation_id,
        agent=slug,
        title=title,
        content=output,
    )
    ctx.session.add(saved)
    ctx.session.flush()
    agent_output = {
        "outputId": saved.id,
        "agent": slug,
        "agentName": name,
        "title": title,
        "offerId": saved.offer_id,
        "content": output,
    }
    return ToolResult(
        content={"output_id": saved.id, "agent": slug, "title": title, "output": output},
        visible_rows=[
            {"kind": "agent_output", "content": "", "meta": {"agentOutput": agent_output}}
        ],
    )
