"""Structured results a model writes (an agent's, or the fast model's for a build tool),
streamed to the timeline only, and saving any of them as an Output shown in the chat.
Knows no tool types: failures are `AgentFailed`, which the tools turn into theirs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.agents.guidelines import append_guidelines, current_rules
from app.events import AgentToken, Event, Timeline
from app.llm.client import ModelClient
from app.llm.structured import Shape, StructuredOutputFailed, structured_call
from app.row_meta import AgentOutput
from app.workspace.models import Offer, Output

FAST_MAX_TOKENS = 4096


class AgentFailed(Exception):
    """The model never wrote a valid result; the message says so, for the person."""


@dataclass(frozen=True)
class Writer:
    """Where a structured answer is written: the model, the run whose timeline streams it,
    and how to end the caller's read transaction before the model call."""

    model: ModelClient
    run_id: int
    emit: Callable[[Event], None]
    end_reads: Callable[[], None]
    should_stop: Callable[[], bool] | None = None


@dataclass(frozen=True)
class SavedOutput:
    """An Output just saved, and the `agentOutput` the chat shows for it."""

    output_id: int
    slug: str
    title: str
    content: dict[str, Any]
    shown: AgentOutput


def answer_tool_name(name: str) -> str:
    """The forced tool a structured answer comes in: "Cast list" -> "submit_cast_list"."""
    words = "".join(c if c.isalnum() else " " for c in name.lower()).split()
    return "submit_" + "_".join(words)


def write_structured(
    writer: Writer,
    *,
    name: str,
    model: str,
    system: str,
    user_message: str,
    schema: dict[str, Any],
    max_tokens: int,
) -> dict[str, Any]:
    """A model's answer in `schema` (a forced tool call), streamed to the timeline under
    `name` and never to the chat body. Ends the caller's read transaction first: no
    database transaction stays open across the model call."""
    writer.end_reads()
    shape = Shape(
        answer_tool_name(name),
        f"Give the {name.lower()} as this tool's input: the input is the whole answer.",
        schema,
    )
    writer.emit(Timeline(writer.run_id, "writing", "started", agent=name))
    try:
        return structured_call(
            writer.model,
            model_name=model,
            system=system,
            messages=[{"role": "user", "content": user_message}],
            shape=shape,
            max_tokens=max_tokens,
            on_progress=lambda text: writer.emit(AgentToken(writer.run_id, name, text)),
            should_stop=writer.should_stop,
        )
    finally:
        writer.emit(Timeline(writer.run_id, "writing", "done", agent=name))


def fast_structured_output(
    session: Session,
    writer: Writer,
    *,
    model: str,
    name: str,
    system: str,
    user_message: str,
    schema: dict[str, Any],
    max_tokens: int = FAST_MAX_TOKENS,
) -> dict[str, Any]:
    """The fast model's answer for a build tool, with the shared guidelines as an admin
    left them (like the agents get them); AgentFailed naming what was wrong when the model
    never complies."""
    system_prompt = append_guidelines(system, current_rules(session))
    try:
        return write_structured(
            writer,
            name=name,
            model=model,
            system=system_prompt,
            user_message=user_message,
            schema=schema,
            max_tokens=max_tokens,
        )
    except StructuredOutputFailed as failed:
        raise AgentFailed(f"The {name.lower()} could not be produced: {failed}") from failed


def save_output(
    session: Session,
    *,
    user_id: int,
    project_id: int,
    conversation_id: int,
    slug: str,
    name: str,
    output: dict[str, Any],
    offer: Offer | None,
    title_field: str = "title",
) -> SavedOutput:
    """Save a structured result as an Output, to show in the chat like an agent's."""
    title = _distinct_title(
        session, project_id, offer, str(output.get(title_field) or name).strip() or name
    )
    saved = Output(
        user_id=user_id,
        project_id=project_id,
        offer_id=offer.id if offer else None,
        conversation_id=conversation_id,
        agent=slug,
        title=title,
        content=output,
    )
    session.add(saved)
    session.flush()
    shown: AgentOutput = {
        "outputId": saved.id,
        "agent": slug,
        "agentName": name,
        "title": title,
        "offerId": saved.offer_id,
        "content": output,
    }
    return SavedOutput(saved.id, slug, title, output, shown)


def _distinct_title(session: Session, project_id: int, offer: Offer | None, title: str) -> str:
    """The title, numbered when the project already has an output of that title for the
    same offer ("… (2)"): two ad copies for one offer are told apart in every list."""
    title = title[:190]
    same_offer = Output.offer_id == offer.id if offer else Output.offer_id.is_(None)
    alike = select(Output.title).where(
        Output.project_id == project_id, same_offer, Output.title.startswith(title, autoescape=True)
    )
    taken = set(session.scalars(alike))
    if title not in taken:
        return title
    number = 2
    while f"{title} ({number})" in taken:
        number += 1
    return f"{title} ({number})"
