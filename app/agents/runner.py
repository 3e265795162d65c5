"""Runs one agent for the host: its prompt, the workspace context it was given, streamed
tokens to the timeline only, a schema-checked JSON output saved as an Output."""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from sqlalchemy.orm import Session

from app.agents.catalog import AgentDefinition
from app.agents.guidelines import append_guidelines, current_rules, guidelines_from_file
from app.chat.budget import estimate_text, input_budget, truncate_text
from app.chat.events import AgentToken, Timeline
from app.llm.client import StreamCallbacks
from app.memory.store import read_memory
from app.tools.context import ToolContext
from app.tools.registry import ToolFailure, ToolResult
from app.workspace.models import Offer, Output, Persona

FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def strip_code_fences(text: str) -> str:
    """Models wrap JSON in ```json fences now and then; take the inside."""
    match = FENCE.match(text)
    return match.group(1) if match else text.strip()


def agent_system_prompt(agent: AgentDefinition, session: Session | None = None) -> str:
    """The agent's prompt plus the shared guidelines as they are in the database now (an
    admin's edit applies to the next run). Without a session: the seed file's rules."""
    rules = guidelines_from_file() if session is None else current_rules(session)
    return append_guidelines(agent.prompt, rules)


def _context_message(ctx: ToolContext, args: dict[str, Any]) -> tuple[str, Offer | None]:
    parts = [f"## Instructions from the host\n{args['instructions']}"]
    personal, _ = read_memory(ctx.session, ctx.user_id)
    if personal.strip():
        parts.append(f"## The person's own standing instructions\n{personal.strip()}")
    offer = None
    if args.get("offer_id") is not None:
        offer = ctx.owned(Offer, args["offer_id"], "offer")
        parts.append(
            "## Offer\n"
            + json.dumps(
                {
                    "id": offer.id,
                    "name": offer.name,
                    "description": offer.description,
                    "audience": offer.audience,
                    "price": offer.price,
                    "brand_colors": offer.brand_colors,
                },
                ensure_ascii=False,
            )
        )
    if args.get("persona_id") is not None:
        persona = ctx.owned(Persona, args["persona_id"], "persona")
        parts.append(
            "## Persona\n"
            + json.dumps(
                {
                    "name": persona.name,
                    "description": persona.description,
                    "pains": persona.pains,
                    "goals": persona.goals,
                },
                ensure_ascii=False,
            )
        )
    for output_id in args.get("reference_output_ids") or []:
        reference = ctx.owned(Output, output_id, "output")
        parts.append(
            f"## Reference output {reference.id} ({reference.agent}: {reference.title})\n"
            + json.dumps(reference.content, ensure_ascii=False)
        )
    parts.append("Answer with the JSON object only.")
    return "\n\n".join(parts), offer


def _parse(text: str, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    try:
        data = json.loads(strip_code_fences(text))
    except json.JSONDecodeError as error:
        return None, f"The answer was not valid JSON ({error.msg} at line {error.lineno})."
    errors = sorted(Draft202012Validator(schema).iter_errors(data), key=str)
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "the top level"
        return None, f"The JSON does not match the schema at {where}: {errors[0].message}"
    return data, None


def run_agent(ctx: ToolContext, agent: AgentDefinition, args: dict[str, Any]) -> ToolResult:
    # Every read first (the current guidelines too, so an admin's edit applies to the next
    # run), then end the transaction: SQLite's write lock must not be held while the model
    # writes. Nothing has been written yet.
    user_message, offer = _context_message(ctx, args)
    system = agent_system_prompt(agent, ctx.session)
    ctx.session.commit()
    settings = ctx.settings
    budget = input_budget(
        settings.context_window_tokens, agent.max_tokens, 0, estimate_text(system)
    )
    user_message = truncate_text(user_message, budget)
    ctx.emit(Timeline(ctx.run_id, "writing", "started", agent=agent.name))
    model = settings.host_model if agent.tier == "host" else settings.fast_model
    messages: list[dict[str, Any]] = [{"role": "user", "content": user_message}]
    callbacks = StreamCallbacks(
        on_text=lambda text: ctx.emit(AgentToken(ctx.run_id, agent.name, text))
    )
    output, problem = None, None
    for _attempt in range(2):
        turn = ctx.services.model.stream_turn(
            {
                "model": model,
                "max_tokens": agent.max_tokens,
                "system": system,
                "messages": messages,
            },
            callbacks,
        )
        output, problem = _parse(turn.text, agent.output_schema)
        if output is not None:
            break
        # One retry, told exactly what was wrong.
        messages = messages + [
            {"role": "assistant", "content": turn.text or "(empty)"},
            {
                "role": "user",
                "content": f"{problem} Answer again with the corrected JSON object only.",
            },
        ]
    ctx.emit(Timeline(ctx.run_id, "writing", "done", agent=agent.name))
    if output is None:
        raise ToolFailure(f"The {agent.name} agent did not produce a valid result: {problem}")
    title = str(output.get(agent.title_field) or agent.name)[:200]
    saved = Output(
        user_id=ctx.user_id,
        offer_id=offer.id if offer else None,
        conversation_id=ctx.conversation_id,
        agent=agent.slug,
        title=title,
        content=output,
    )
    ctx.session.add(saved)
    ctx.session.flush()
    agent_output = {
        "outputId": saved.id,
        "agent": agent.slug,
        "agentName": agent.name,
        "title": title,
        "offerId": saved.offer_id,
        "content": output,
    }
    return ToolResult(
        content={"output_id": saved.id, "agent": agent.slug, "title": title, "output": output},
        visible_rows=[
            {"kind": "agent_output", "content": "", "meta": {"agentOutput": agent_output}}
        ],
    )
