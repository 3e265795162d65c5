"""What the build tools tell the fast model about the workspace (an offer, a persona, the
persona's offer), small schema pieces they share, and the ids their inputs take."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import select

from app.media.providers import normalise_colours
from app.tools.context import ToolContext
from app.tools.registry import Integer
from app.tools.results import ToolFailure
from app.workspace.models import Offer, Persona

OfferId = Annotated[Integer, Field(description="The offer's id (from list_offers).")]
PersonaId = Annotated[Integer, Field(description="The persona's id (from list_personas).")]
CharacterId = Annotated[Integer, Field(description="The character's id.")]


def clean_text(value: str, what: str, one_line: bool = True) -> str:
    """Trimmed text (one line with single spaces when `one_line`); blank is a failure."""
    cleaned = " ".join(value.split()) if one_line else value.strip()
    if not cleaned:
        raise ToolFailure(f"The {what} cannot be blank.")
    return cleaned


def offer_facts(offer: Offer) -> dict[str, Any]:
    return {
        "name": offer.name,
        "description": offer.description,
        "audience": offer.audience,
        "price": offer.price,
        "brand_colors": list(normalise_colours(offer.brand_colors)),
    }


def persona_facts(persona: Persona) -> dict[str, Any]:
    return {
        "name": persona.name,
        "description": persona.description,
        "pains": persona.pains,
        "goals": persona.goals,
    }


def persona_offer(ctx: ToolContext, persona: Persona | None) -> Offer | None:
    if persona is None or persona.offer_id is None:
        return None
    return ctx.session.scalar(
        select(Offer).where(Offer.id == persona.offer_id, Offer.project_id == ctx.project_id)
    )


def section(title: str, data: Any) -> str:
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"## {title}\n{body}"


def short_text(max_length: int, min_length: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length, "maxLength": max_length}


def named_items(key: str, max_items: int, min_items: int = 0) -> dict[str, Any]:
    return {
        "type": "array",
        "minItems": min_items,
        "maxItems": max_items,
        "items": {
            "type": "object",
            "properties": {key: short_text(120), "description": short_text(600)},
            "required": [key, "description"],
        },
    }
