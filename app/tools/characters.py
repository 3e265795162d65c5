"""Character tools: save one, link one to a persona, and propose a cast the person approves
on a card before anything is saved."""

from __future__ import annotations

from typing import Annotated, Any

from jsonschema import Draft202012Validator
from pydantic import Field
from sqlalchemy import select

from app.tools.agent import fast_output
from app.tools.context import ToolContext
from app.tools.groups import CHARACTERS
from app.tools.registry import ACTION, NOT_A_BOOLEAN, ToolInput, ToolRegistry
from app.tools.results import Pause, ToolFailure, confirmation
from app.tools.tool_prompts import tool_prompt
from app.tools.workspace_facts import (
    CharacterId,
    OfferId,
    PersonaId,
    clean_text,
    offer_facts,
    persona_facts,
    section,
    short_text,
)
from app.workspace.models import Character, Offer, Persona

REGISTRY = ToolRegistry(group=CHARACTERS)

DEFAULT_CAST = 3


class CharacterInput(ToolInput):
    name: str = Field(min_length=1, max_length=120)
    description: str = Field(
        max_length=4000, description="Who they are and how they look, in a few sentences."
    )
    persona_id: PersonaId | None = Field(None, description="The persona this character embodies.")


class LinkInput(ToolInput):
    character_id: CharacterId
    persona_id: PersonaId


class CastInput(ToolInput):
    persona_id: PersonaId
    offer_id: OfferId
    count: Annotated[int, Field(ge=1, le=6), NOT_A_BOOLEAN] | None = None
    direction: str | None = Field(
        None, max_length=1000, description="What the cast should be like, in the person's words."
    )


@REGISTRY.tool(
    name="save_character",
    description=(
        "Save one character (a recurring person for ads and visuals: a customer, a founder, a "
        "mascot) to the person's workspace, optionally linked to an audience persona. Use it when "
        "the person has described or approved a character. Returns the new character_id. To "
        "propose several characters for the person to approve, use propose_cast_list."
    ),
    note="save_character: save a character (name, description, optional persona).",
    category=ACTION,
    input=CharacterInput,
    label="Saved a character",
)
def save_character(ctx: ToolContext, args: CharacterInput) -> dict[str, Any]:
    name = clean_text(args.name, "character's name")
    persona = None
    if args.persona_id is not None:
        persona = ctx.owned(Persona, args.persona_id, "persona")
    character = Character(
        user_id=ctx.user_id,
        project_id=ctx.project_id,
        persona_id=persona.id if persona else None,
        name=name,
        description=args.description.strip(),
    )
    ctx.session.add(character)
    ctx.session.flush()
    linked = f", linked to the persona {persona.name}" if persona else ""
    return {
        "character_id": character.id,
        "name": character.name,
        "persona_id": character.persona_id,
        "message": f"Saved the character {character.name}{linked}.",
    }


@REGISTRY.tool(
    name="link_character_persona",
    description=(
        "Link a saved character to an audience persona (replacing any earlier link), so the "
        "character stands for that persona in ads, portraits and storyboards."
    ),
    note="link_character_persona: link a character to a persona.",
    category=ACTION,
    input=LinkInput,
    label="Linked a character to a persona",
)
def link_character_persona(ctx: ToolContext, args: LinkInput) -> dict[str, Any]:
    character = ctx.owned(Character, args.character_id, "character")
    persona = ctx.owned(Persona, args.persona_id, "persona")
    previous = character.persona_id
    character.persona_id = persona.id
    ctx.session.flush()
    return {
        "character_id": character.id,
        "persona_id": persona.id,
        "previous_persona_id": previous,
        "message": f"{character.name} is now linked to the persona {persona.name}.",
    }


CAST_MEMBER = {
    "type": "object",
    "properties": {
        "name": short_text(120),
        "role": short_text(120),
        "description": short_text(1500),
    },
    "required": ["name", "role", "description"],
}


def cast_schema(count: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "characters": {
                "type": "array",
                "minItems": count,
                "maxItems": count,
                "items": CAST_MEMBER,
            }
        },
        "required": ["characters"],
    }


# What an approved card carries back: checked again, the card is data like any other.
APPROVED_CAST = {
    "type": "object",
    "properties": {
        "persona_id": {"type": "integer"},
        "offer_id": {"type": "integer"},
        "characters": {"type": "array", "minItems": 1, "maxItems": 6, "items": CAST_MEMBER},
    },
    "required": ["persona_id", "offer_id", "characters"],
}


def save_cast(ctx: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """The approved cast, saved in one go, linked to the persona."""
    errors = sorted(Draft202012Validator(APPROVED_CAST).iter_errors(arguments), key=str)
    if errors:
        raise ToolFailure(f"The approved cast list is malformed: {errors[0].message}")
    persona = ctx.owned(Persona, arguments["persona_id"], "persona")
    saved = []
    for item in arguments["characters"]:
        role, description = item["role"].strip(), item["description"].strip()
        character = Character(
            user_id=ctx.user_id,
            project_id=ctx.project_id,
            persona_id=persona.id,
            name=clean_text(item["name"], "character's name")[:120],
            description=f"{role[:1].upper()}{role[1:]}. {description}" if role else description,
        )
        ctx.session.add(character)
        saved.append((character, role))
    ctx.session.flush()
    return {
        "approved": True,
        "persona_id": persona.id,
        "characters": [
            {"character_id": character.id, "name": character.name, "role": role}
            for character, role in saved
        ],
        "message": f"Saved {len(saved)} character{'s' if len(saved) != 1 else ''} "
        f"for the persona {persona.name}.",
    }


@REGISTRY.tool(
    name="propose_cast_list",
    description=(
        "Propose a cast of characters (1 to 6, default 3) for one persona and offer: the fast "
        "model invents names, roles and descriptions, then the person sees them on a confirmation "
        "card. Nothing is saved unless they allow it; when they do, the characters are saved "
        "linked to the persona and you get their ids. Give direction (tone, ages, setting) when "
        "the person has said what they want."
    ),
    note="propose_cast_list: propose characters for a persona; saved only after the person allows.",
    category=ACTION,
    input=CastInput,
    billable=True,
    on_approved=save_cast,
    label="Proposed a cast list",
)
def propose_cast_list(ctx: ToolContext, args: CastInput) -> Pause:
    persona = ctx.owned(Persona, args.persona_id, "persona")
    offer = ctx.owned(Offer, args.offer_id, "offer")
    count = args.count or DEFAULT_CAST
    existing = ctx.session.scalars(
        select(Character.name)
        .where(Character.project_id == ctx.project_id, Character.persona_id == persona.id)
        .limit(50)
    ).all()
    parts = [
        section("Offer", offer_facts(offer)),
        section("Audience persona", persona_facts(persona)),
    ]
    if existing:
        parts.append(section("Characters this persona already has (do not repeat)", existing))
    direction = (args.direction or "").strip()
    if direction:
        parts.append(section("Direction from the person", direction))
    parts.append(f"Propose exactly {count} characters. Answer with the JSON object only.")
    output = fast_output(
        ctx, "Cast list", tool_prompt("cast-list"), "\n\n".join(parts), cast_schema(count)
    )
    characters = [
        {
            "name": " ".join(item["name"].split()),
            "role": " ".join(item["role"].split()),
            "description": item["description"].strip(),
        }
        for item in output["characters"]
    ]
    listed = "; ".join(f"{c['name']} ({c['role']})" for c in characters)
    title = (
        "Save this character?"
        if len(characters) == 1
        else f"Save these {len(characters)} characters?"
    )
    return confirmation(
        arguments={"persona_id": persona.id, "offer_id": offer.id, "characters": characters},
        reason=(
            f"Proposed for the persona {persona.name} ({offer.name}): {listed}. "
            "They are saved to your workspace only if you allow it."
        ),
        title=title,
    )
