"""A case's starting point: a new person with the workspace its setup names, and a count of
what a workspace holds, taken before and after the case to see what it wrote."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.service import create_user
from app.chat.attachments import save_attachment
from app.chat.conversations import create_conversation
from app.evals.cases import Setup
from app.memory.models import UserMemory
from app.memory.store import lock_memory
from app.workspace.attachments import prepare_attachment
from app.workspace.models import Campaign, Character, Offer, Output, Persona, VisualAsset

# The person every case starts as: a fresh account in the eval's own database.
EVAL_DOMAIN = "eval.loopdesk.invalid"
COUNTED: dict[str, Any] = {
    "offers": Offer,
    "personas": Persona,
    "outputs": Output,
    "characters": Character,
    "campaigns": Campaign,
    "visual_assets": VisualAsset,
}


def start_case(session: Session, setup: Setup) -> tuple[int, int, dict[str, int]]:
    """(person id, chat id, the ids the setup made by name: `offer:<name>`,
    `persona:<name>`, `output:<title>`), in the caller's transaction."""
    email = f"eval-{uuid.uuid4().hex[:12]}@{EVAL_DOMAIN}"
    user = create_user(session, email, uuid.uuid4().hex)
    session.flush()
    ids = _add_workspace(session, user.id, setup)
    if setup.memory or setup.instructions:
        memory = lock_memory(session, user.id)
        memory.facts = list(setup.memory)
        memory.instructions = setup.instructions
    conversation = create_conversation(session, user.id, "Eval")
    conversation.tool_phase = setup.phase
    for attached in setup.attachments:
        data = attached.text.encode()
        save_attachment(
            session,
            user.id,
            conversation.id,
            prepare_attachment(attached.filename, "text/plain", data),
        )
    return user.id, conversation.id, ids


def _add_workspace(session: Session, user_id: int, setup: Setup) -> dict[str, int]:
    ids: dict[str, int] = {}
    for offered in setup.offers:
        values = offered.model_dump(exclude={"personas"})
        offer = Offer(user_id=user_id, **values)
        session.add(offer)
        session.flush()
        ids[f"offer:{offer.name}"] = offer.id
        for described in offered.personas:
            persona = Persona(user_id=user_id, offer_id=offer.id, **described.model_dump())
            session.add(persona)
            session.flush()
            ids[f"persona:{persona.name}"] = persona.id
    for saved in setup.outputs:
        offer_id = ids.get(f"offer:{saved.offer}") if saved.offer else None
        if saved.offer and offer_id is None:
            raise ValueError(f"output {saved.title!r} names no offer of the setup: {saved.offer}")
        output = Output(
            user_id=user_id,
            offer_id=offer_id,
            agent=saved.agent,
            title=saved.title,
            content=saved.content,
        )
        session.add(output)
        session.flush()
        ids[f"output:{output.title}"] = output.id
    return ids


def workspace_counts(session: Session, user_id: int) -> dict[str, int]:
    """How many of each thing the person's workspace holds, and their remembered facts."""
    counts = {
        name: session.scalar(
            select(func.count()).select_from(model).where(model.user_id == user_id)
        )
        or 0
        for name, model in COUNTED.items()
    }
    memory = session.get(UserMemory, user_id)
    counts["memory_facts"] = len(memory.facts or []) if memory else 0
    return counts
