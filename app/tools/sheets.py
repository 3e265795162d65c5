"""Planning tools the fast model writes: an element sheet (the visual bible of a character
or a brand) and a storyboard for a short video ad, each saved as an output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import select

from app.tools.agent import fast_output, output_result
from app.tools.context import ToolContext
from app.tools.groups import IMAGES
from app.tools.registry import ACTION, NOT_A_BOOLEAN, ToolInput, ToolRegistry
from app.tools.results import ToolFailure, ToolResult
from app.tools.tool_prompts import tool_prompt
from app.tools.workspace_facts import (
    CharacterId,
    OfferId,
    PersonaId,
    named_items,
    offer_facts,
    persona_facts,
    persona_offer,
    section,
    short_text,
)
from app.workspace.models import Character, Offer, Persona

REGISTRY = ToolRegistry(group=IMAGES)

DEFAULT_SCENES = 6


class ElementSheetInput(ToolInput):
    character_id: CharacterId | None = None
    offer_id: OfferId | None = None
    focus: str | None = Field(
        None, max_length=1000, description="What to focus on (a campaign, a season, a format)."
    )


class StoryboardInput(ToolInput):
    offer_id: OfferId
    persona_id: PersonaId | None = Field(None, description="The persona the video speaks to.")
    format: str | None = Field(None, min_length=1, max_length=100)
    scenes: Annotated[int, Field(ge=3, le=12), NOT_A_BOOLEAN] | None = None
    direction: str | None = Field(
        None,
        max_length=2000,
        description="The idea, script notes or anything the person asked for.",
    )


HEX = {"type": "string", "pattern": "^#[0-9A-Fa-f]{6}$"}
ELEMENT_SHEET_SCHEMA = {
    "type": "object",
    "properties": {
        "title": short_text(200),
        "summary": short_text(1500),
        "palette": {
            "type": "array",
            "minItems": 2,
            "maxItems": 8,
            "items": {
                "type": "object",
                "properties": {"name": short_text(60), "hex": HEX, "use": short_text(300)},
                "required": ["name", "hex", "use"],
            },
        },
        "visual_elements": named_items("element", 12, min_items=1),
        "wardrobe": named_items("item", 12),
        "props": named_items("item", 12),
        "locations": named_items("place", 8),
        "lighting": short_text(600),
        "mood": short_text(600),
        "avoid": {"type": "array", "maxItems": 10, "items": short_text(300)},
    },
    "required": [
        "title",
        "summary",
        "palette",
        "visual_elements",
        "wardrobe",
        "props",
        "locations",
        "lighting",
        "mood",
        "avoid",
    ],
}


@REGISTRY.tool(
    name="generate_element_sheet",
    description=(
        "Write an element sheet (the visual bible: palette, recurring visual elements, wardrobe, "
        "props, locations, lighting, mood, things to avoid) for a character (character_id) or for "
        "an offer's brand world (offer_id); give both for a character within that offer. It is "
        "saved as an output and shown to the person. Use it before generating images so they stay "
        "consistent."
    ),
    note="generate_element_sheet: a visual element sheet for a character or an offer.",
    category=ACTION,
    input=ElementSheetInput,
    billable=True,
    label="Wrote an element sheet",
)
def generate_element_sheet(ctx: ToolContext, args: ElementSheetInput) -> ToolResult:
    if args.character_id is None and args.offer_id is None:
        raise ToolFailure(
            "generate_element_sheet needs character_id (a character's sheet) or offer_id "
            "(the offer's visual world)."
        )
    character = persona = offer = None
    if args.character_id is not None:
        character = ctx.owned(Character, args.character_id, "character")
        if character.persona_id is not None:
            persona = ctx.session.scalar(
                select(Persona).where(
                    Persona.id == character.persona_id, Persona.project_id == ctx.project_id
                )
            )
    if args.offer_id is not None:
        offer = ctx.owned(Offer, args.offer_id, "offer")
    else:
        offer = persona_offer(ctx, persona)
    parts = []
    if character is not None:
        parts.append(
            section(
                "The character this sheet is for",
                {"name": character.name, "description": character.description},
            )
        )
    if persona is not None:
        parts.append(section("The audience persona they stand for", persona_facts(persona)))
    if offer is not None:
        parts.append(section("Offer and brand", offer_facts(offer)))
    focus = (args.focus or "").strip()
    if focus:
        parts.append(section("Focus", focus))
    if character is not None:
        subject = f"the character {character.name}"
    else:
        assert offer is not None  # no character_id, so an offer_id (checked above)
        subject = f"the offer {offer.name}"
    parts.append(f"Write the element sheet for {subject}. Answer with the JSON object only.")
    output = fast_output(
        ctx, "Element sheet", tool_prompt("element-sheet"), "\n\n".join(parts), ELEMENT_SHEET_SCHEMA
    )
    if character is not None:
        output["character_id"] = character.id
    return output_result(ctx, "element-sheet", "Element sheet", output, offer)


def storyboard_schema(scenes: int | None) -> dict[str, Any]:
    scene = {
        "type": "object",
        "properties": {
            "number": {"type": "integer", "minimum": 1},
            "shot": short_text(200),
            "visual": short_text(1000),
            "voiceover": short_text(1000, min_length=0),
            "on_screen_text": short_text(300, min_length=0),
            "duration_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 120},
        },
        "required": ["number", "shot", "visual", "voiceover", "duration_seconds"],
    }
    return {
        "type": "object",
        "properties": {
            "title": short_text(200),
            "format": short_text(100),
            "concept": short_text(1000),
            "scenes": {
                "type": "array",
                "minItems": scenes or 3,
                "maxItems": scenes or 12,
                "items": scene,
            },
            "call_to_action": short_text(300),
        },
        "required": ["title", "format", "concept", "scenes", "call_to_action"],
    }


@REGISTRY.tool(
    name="create_storyboard",
    description=(
        "Write a storyboard for a short video ad for an offer (optionally aimed at a persona): "
        "scenes with shot, visual, voiceover, on-screen text and duration, plus the call to "
        'action. It is saved as an output and shown to the person. Give format (e.g. "vertical '
        '9:16, 15 seconds"), scenes (3 to 12) and direction when known. Works without a video '
        "provider: it is a plan, not a video file."
    ),
    note="create_storyboard: a scene-by-scene storyboard for a video ad.",
    category=ACTION,
    input=StoryboardInput,
    billable=True,
    label="Wrote a storyboard",
)
def create_storyboard(ctx: ToolContext, args: StoryboardInput) -> ToolResult:
    offer = ctx.owned(Offer, args.offer_id, "offer")
    persona = None
    if args.persona_id is not None:
        persona = ctx.owned(Persona, args.persona_id, "persona")
    scenes = args.scenes
    parts = [section("Offer and brand", offer_facts(offer))]
    if persona is not None:
        parts.append(section("Audience persona", persona_facts(persona)))
    characters: Sequence[Any] = []
    if persona is not None:
        characters = ctx.session.execute(
            select(Character.name, Character.description)
            .where(Character.project_id == ctx.project_id, Character.persona_id == persona.id)
            .order_by(Character.id)
            .limit(6)
        ).all()
    if characters:
        parts.append(
            section(
                "Characters who can appear",
                [{"name": row.name, "description": row.description} for row in characters],
            )
        )
    format_, direction = (args.format or "").strip(), (args.direction or "").strip()
    if format_:
        parts.append(section("Format", format_))
    if direction:
        parts.append(section("Direction from the person", direction))
    count = f"exactly {scenes}" if scenes else f"about {DEFAULT_SCENES} (3 to 12)"
    parts.append(f"Write {count} scenes. Answer with the JSON object only.")
    output = fast_output(
        ctx, "Storyboard", tool_prompt("storyboard"), "\n\n".join(parts), storyboard_schema(scenes)
    )
    return output_result(ctx, "storyboard", "Storyboard", output, offer)
