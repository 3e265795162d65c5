"""Action tools: they do something (save, generate, start) and report back.

Every id a tool receives is checked to be the caller's (`ctx.owned`); a tool's writes and
its result rows commit together, so a failing tool writes nothing. The tools that ask the
fast model for a structured answer (a cast list, an element sheet, a storyboard) send its
schema as a forced tool (`app.agents.outputs`); images go through the configured provider
in `app.media.providers`. A slow tool reads, ends its transaction, does the slow work,
then writes (see `app.tools.registry`)."""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator
from sqlalchemy import select

from app.media.providers import ImageStyle, MediaError, image_provider, normalise_colours
from app.memory.store import (
    MemoryRefused,
    Operation,
    apply_operations,
    fallback_operations,
    mark_facts,
    reconcile,
)
from app.tools.agent import fast_output, output_result
from app.tools.context import ToolContext
from app.tools.read import asset_url
from app.tools.registry import ToolRegistry, tool
from app.tools.results import Pause, ToolFailure, ToolResult, confirmation
from app.workspace.images import FALLBACK_COLOURS
from app.workspace.models import (
    Campaign,
    Character,
    ImagePreset,
    Offer,
    Persona,
    VisualAsset,
)

REGISTRY = ToolRegistry()

MAX_BRIEFING_CHARS = 20_000
LONGEST_SIDE = 1024
DEFAULT_CAST = 3
DEFAULT_SCENES = 6

OFFER_ID = {"type": "integer", "description": "The offer's id (from list_offers)."}
PERSONA_ID = {"type": "integer", "description": "The persona's id (from list_personas)."}
CHARACTER_ID = {"type": "integer", "description": "The character's id."}
PRESET_ID = {
    "type": "integer",
    "description": "An image preset's id (from list_image_presets or configure_image).",
}
ASPECT_RATIO = {
    "type": "string",
    "pattern": "^[1-9][0-9]?:[1-9][0-9]?$",
    "description": 'Width:height such as "1:1", "4:5", "9:16" or "16:9".',
}


def action_tool(name: str, description: str, note: str, **options: Any):
    options.setdefault("phase", "build")
    return tool(
        REGISTRY,
        name=name,
        description=description,
        category="action",
        read_only=False,
        note=note,
        **options,
    )


def _clean(value: str, what: str, one_line: bool = True) -> str:
    """Trimmed text (one line with single spaces when `one_line`); blank is a failure."""
    cleaned = " ".join(value.split()) if one_line else value.strip()
    if not cleaned:
        raise ToolFailure(f"The {what} cannot be blank.")
    return cleaned


def _offer_facts(offer: Offer) -> dict[str, Any]:
    return {
        "name": offer.name,
        "description": offer.description,
        "audience": offer.audience,
        "price": offer.price,
        "brand_colors": list(normalise_colours(offer.brand_colors)),
    }


def _persona_facts(persona: Persona) -> dict[str, Any]:
    return {
        "name": persona.name,
        "description": persona.description,
        "pains": persona.pains,
        "goals": persona.goals,
    }


def _persona_offer(ctx: ToolContext, persona: Persona | None) -> Offer | None:
    if persona is None or persona.offer_id is None:
        return None
    return ctx.session.scalar(
        select(Offer).where(Offer.id == persona.offer_id, Offer.user_id == ctx.user_id)
    )


def _section(title: str, data: Any) -> str:
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"## {title}\n{body}"


def _short_text(max_length: int, min_length: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length, "maxLength": max_length}


def _named_items(key: str, max_items: int, min_items: int = 0) -> dict[str, Any]:
    return {
        "type": "array",
        "minItems": min_items,
        "maxItems": max_items,
        "items": {
            "type": "object",
            "properties": {key: _short_text(120), "description": _short_text(600)},
            "required": [key, "description"],
        },
    }


# --- characters ------------------------------------------------------------------------


@action_tool(
    "save_character",
    "Save one character (a recurring person for ads and visuals: a customer, a founder, a "
    "mascot) to the person's workspace, optionally linked to an audience persona. Use it "
    "when the person has described or approved a character. Returns the new character_id. "
    "To propose several characters for the person to approve, use propose_cast_list.",
    "save_character: save a character (name, description, optional persona).",
    properties={
        "name": {"type": "string", "minLength": 1, "maxLength": 120},
        "description": {
            "type": "string",
            "maxLength": 4000,
            "description": "Who they are and how they look, in a few sentences.",
        },
        "persona_id": {**PERSONA_ID, "description": "The persona this character embodies."},
    },
    required=("name", "description"),
    label="Saved a character",
)
def save_character(ctx: ToolContext, args: dict) -> dict:
    name = _clean(args["name"], "character's name")
    persona = None
    if "persona_id" in args:
        persona = ctx.owned(Persona, args["persona_id"], "persona")
    character = Character(
        user_id=ctx.user_id,
        persona_id=persona.id if persona else None,
        name=name,
        description=args["description"].strip(),
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


@action_tool(
    "link_character_persona",
    "Link a saved character to an audience persona (replacing any earlier link), so the "
    "character stands for that persona in ads, portraits and storyboards.",
    "link_character_persona: link a character to a persona.",
    properties={"character_id": CHARACTER_ID, "persona_id": PERSONA_ID},
    required=("character_id", "persona_id"),
    label="Linked a character to a persona",
)
def link_character_persona(ctx: ToolContext, args: dict) -> dict:
    character = ctx.owned(Character, args["character_id"], "character")
    persona = ctx.owned(Persona, args["persona_id"], "persona")
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
        "name": _short_text(120),
        "role": _short_text(120),
        "description": _short_text(1500),
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

CAST_SYSTEM = """You are a casting director for a small business's marketing. You propose \
recurring characters for its ads, visuals and stories: believable people the audience \
persona recognises themselves in (or a guide they would trust), each distinct in age, \
situation and look, and each with a clear role in the cast.

Answer with one JSON object: {"characters": [{"name": "...", "role": "...", \
"description": "..."}]}. The name is a first name and surname; the role is a few words \
(for example "the sceptical first-time buyer"); the description is two to four sentences \
covering who they are, what they want and how they look (age, style, setting) so an \
illustrator could draw them."""


def save_cast(ctx: ToolContext, arguments: dict) -> dict:
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
            persona_id=persona.id,
            name=_clean(item["name"], "character's name")[:120],
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


@action_tool(
    "propose_cast_list",
    "Propose a cast of characters (1 to 6, default 3) for one persona and offer: the fast "
    "model invents names, roles and descriptions, then the person sees them on a "
    "confirmation card. Nothing is saved unless they allow it; when they do, the "
    "characters are saved linked to the persona and you get their ids. Give direction "
    "(tone, ages, setting) when the person has said what they want.",
    "propose_cast_list: propose characters for a persona; saved only after the person allows.",
    properties={
        "persona_id": PERSONA_ID,
        "offer_id": OFFER_ID,
        "count": {"type": "integer", "minimum": 1, "maximum": 6},
        "direction": {
            "type": "string",
            "maxLength": 1000,
            "description": "What the cast should be like, in the person's words.",
        },
    },
    required=("persona_id", "offer_id"),
    billable=True,
    on_approved=save_cast,
    label="Proposed a cast list",
)
def propose_cast_list(ctx: ToolContext, args: dict) -> Pause:
    persona = ctx.owned(Persona, args["persona_id"], "persona")
    offer = ctx.owned(Offer, args["offer_id"], "offer")
    count = args.get("count", DEFAULT_CAST)
    existing = ctx.session.scalars(
        select(Character.name)
        .where(Character.user_id == ctx.user_id, Character.persona_id == persona.id)
        .limit(50)
    ).all()
    parts = [
        _section("Offer", _offer_facts(offer)),
        _section("Audience persona", _persona_facts(persona)),
    ]
    if existing:
        parts.append(_section("Characters this persona already has (do not repeat)", existing))
    if (args.get("direction") or "").strip():
        parts.append(_section("Direction from the person", args["direction"].strip()))
    parts.append(f"Propose exactly {count} characters. Answer with the JSON object only.")
    output = fast_output(ctx, "Cast list", CAST_SYSTEM, "\n\n".join(parts), cast_schema(count))
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


# --- element sheets and storyboards ----------------------------------------------------

HEX = {"type": "string", "pattern": "^#[0-9A-Fa-f]{6}$"}
ELEMENT_SHEET_SCHEMA = {
    "type": "object",
    "properties": {
        "title": _short_text(200),
        "summary": _short_text(1500),
        "palette": {
            "type": "array",
            "minItems": 2,
            "maxItems": 8,
            "items": {
                "type": "object",
                "properties": {"name": _short_text(60), "hex": HEX, "use": _short_text(300)},
                "required": ["name", "hex", "use"],
            },
        },
        "visual_elements": _named_items("element", 12, min_items=1),
        "wardrobe": _named_items("item", 12),
        "props": _named_items("item", 12),
        "locations": _named_items("place", 8),
        "lighting": _short_text(600),
        "mood": _short_text(600),
        "avoid": {"type": "array", "maxItems": 10, "items": _short_text(300)},
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

ELEMENT_SHEET_SYSTEM = """You are an art director. You write element sheets: the visual \
bible that keeps every ad, image and video for a brand or a character consistent.

Answer with one JSON object with these keys: "title"; "summary" (two or three sentences on \
the overall look); "palette" (2 to 8 colours, each {"name", "hex" as #RRGGBB, "use"}; \
start from the brand colours when given); "visual_elements" (recurring shapes, textures, \
motifs and framing, each {"element", "description"}); "wardrobe" and "props" (each \
{"item", "description"}; empty lists when they do not apply); "locations" (each \
{"place", "description"}); "lighting"; "mood"; "avoid" (a list of things that would break \
the look)."""


@action_tool(
    "generate_element_sheet",
    "Write an element sheet (the visual bible: palette, recurring visual elements, "
    "wardrobe, props, locations, lighting, mood, things to avoid) for a character "
    "(character_id) or for an offer's brand world (offer_id); give both for a character "
    "within that offer. It is saved as an output and shown to the person. Use it before "
    "generating images so they stay consistent.",
    "generate_element_sheet: a visual element sheet for a character or an offer.",
    properties={
        "character_id": CHARACTER_ID,
        "offer_id": OFFER_ID,
        "focus": {
            "type": "string",
            "maxLength": 1000,
            "description": "What to focus on (a campaign, a season, a format).",
        },
    },
    billable=True,
    label="Wrote an element sheet",
)
def generate_element_sheet(ctx: ToolContext, args: dict) -> ToolResult:
    if "character_id" not in args and "offer_id" not in args:
        raise ToolFailure(
            "generate_element_sheet needs character_id (a character's sheet) or offer_id "
            "(the offer's visual world)."
        )
    character = persona = offer = None
    if "character_id" in args:
        character = ctx.owned(Character, args["character_id"], "character")
        if character.persona_id is not None:
            persona = ctx.session.scalar(
                select(Persona).where(
                    Persona.id == character.persona_id, Persona.user_id == ctx.user_id
                )
            )
    if "offer_id" in args:
        offer = ctx.owned(Offer, args["offer_id"], "offer")
    else:
        offer = _persona_offer(ctx, persona)
    parts = []
    if character is not None:
        parts.append(
            _section(
                "The character this sheet is for",
                {"name": character.name, "description": character.description},
            )
        )
    if persona is not None:
        parts.append(_section("The audience persona they stand for", _persona_facts(persona)))
    if offer is not None:
        parts.append(_section("Offer and brand", _offer_facts(offer)))
    if (args.get("focus") or "").strip():
        parts.append(_section("Focus", args["focus"].strip()))
    subject = f"the character {character.name}" if character else f"the offer {offer.name}"
    parts.append(f"Write the element sheet for {subject}. Answer with the JSON object only.")
    output = fast_output(
        ctx, "Element sheet", ELEMENT_SHEET_SYSTEM, "\n\n".join(parts), ELEMENT_SHEET_SCHEMA
    )
    if character is not None:
        output["character_id"] = character.id
    return output_result(ctx, "element-sheet", "Element sheet", output, offer)


def storyboard_schema(scenes: int | None) -> dict[str, Any]:
    scene = {
        "type": "object",
        "properties": {
            "number": {"type": "integer", "minimum": 1},
            "shot": _short_text(200),
            "visual": _short_text(1000),
            "voiceover": _short_text(1000, min_length=0),
            "on_screen_text": _short_text(300, min_length=0),
            "duration_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": 120},
        },
        "required": ["number", "shot", "visual", "voiceover", "duration_seconds"],
    }
    return {
        "type": "object",
        "properties": {
            "title": _short_text(200),
            "format": _short_text(100),
            "concept": _short_text(1000),
            "scenes": {
                "type": "array",
                "minItems": scenes or 3,
                "maxItems": scenes or 12,
                "items": scene,
            },
            "call_to_action": _short_text(300),
        },
        "required": ["title", "format", "concept", "scenes", "call_to_action"],
    }


STORYBOARD_SYSTEM = """You are a director of short marketing videos. You write storyboards \
that a small team can shoot or animate: a hook in the first seconds, one idea, a clear \
call to action.

Answer with one JSON object with these keys: "title"; "format" (for example "vertical \
9:16, 15 seconds"); "concept" (one or two sentences); "scenes" (each {"number", "shot" \
(framing and camera move), "visual" (what we see), "voiceover" (what is said, "" for \
none), "on_screen_text" ("" for none), "duration_seconds"}); "call_to_action"."""


@action_tool(
    "create_storyboard",
    "Write a storyboard for a short video ad for an offer (optionally aimed at a persona): "
    "scenes with shot, visual, voiceover, on-screen text and duration, plus the call to "
    "action. It is saved as an output and shown to the person. Give format (e.g. "
    '"vertical 9:16, 15 seconds"), scenes (3 to 12) and direction when known. Works '
    "without a video provider: it is a plan, not a video file.",
    "create_storyboard: a scene-by-scene storyboard for a video ad.",
    properties={
        "offer_id": OFFER_ID,
        "persona_id": {**PERSONA_ID, "description": "The persona the video speaks to."},
        "format": {"type": "string", "minLength": 1, "maxLength": 100},
        "scenes": {"type": "integer", "minimum": 3, "maximum": 12},
        "direction": {
            "type": "string",
            "maxLength": 2000,
            "description": "The idea, script notes or anything the person asked for.",
        },
    },
    required=("offer_id",),
    billable=True,
    label="Wrote a storyboard",
)
def create_storyboard(ctx: ToolContext, args: dict) -> ToolResult:
    offer = ctx.owned(Offer, args["offer_id"], "offer")
    persona = None
    if "persona_id" in args:
        persona = ctx.owned(Persona, args["persona_id"], "persona")
    scenes = args.get("scenes")
    parts = [_section("Offer and brand", _offer_facts(offer))]
    if persona is not None:
        parts.append(_section("Audience persona", _persona_facts(persona)))
    characters = []
    if persona is not None:
        characters = ctx.session.execute(
            select(Character.name, Character.description)
            .where(Character.user_id == ctx.user_id, Character.persona_id == persona.id)
            .order_by(Character.id)
            .limit(6)
        ).all()
    if characters:
        parts.append(
            _section(
                "Characters who can appear",
                [{"name": row.name, "description": row.description} for row in characters],
            )
        )
    if (args.get("format") or "").strip():
        parts.append(_section("Format", args["format"].strip()))
    if (args.get("direction") or "").strip():
        parts.append(_section("Direction from the person", args["direction"].strip()))
    count = f"exactly {scenes}" if scenes else f"about {DEFAULT_SCENES} (3 to 12)"
    parts.append(f"Write {count} scenes. Answer with the JSON object only.")
    output = fast_output(
        ctx, "Storyboard", STORYBOARD_SYSTEM, "\n\n".join(parts), storyboard_schema(scenes)
    )
    return output_result(ctx, "storyboard", "Storyboard", output, offer)


# --- campaigns -------------------------------------------------------------------------


@action_tool(
    "start_campaign",
    "Save a campaign for an offer from its briefing (goal, audience, channels, budget, "
    'timing, notes, as collected with collect_campaign_briefing). status "draft" '
    '(the default) keeps it for review; "started" records that the person has said to go '
    "ahead. Loopdesk does not buy ads or publish anything itself. Returns the campaign_id "
    "(get_campaign_status reports it).",
    "start_campaign: save a campaign (draft or started) from a briefing.",
    properties={
        "offer_id": OFFER_ID,
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "briefing": {
            "type": "object",
            "maxProperties": 40,
            "description": "The briefing's answers, e.g. goal, audience, channels, budget.",
        },
        "status": {"type": "string", "enum": ["draft", "started"]},
    },
    required=("offer_id", "name", "briefing"),
    label="Saved a campaign",
)
def start_campaign(ctx: ToolContext, args: dict) -> dict:
    offer = ctx.owned(Offer, args["offer_id"], "offer")
    name = _clean(args["name"], "campaign's name")
    briefing = args["briefing"]
    if len(json.dumps(briefing, ensure_ascii=False)) > MAX_BRIEFING_CHARS:
        raise ToolFailure(
            f"The briefing is too long (at most {MAX_BRIEFING_CHARS:,} characters as JSON)."
        )
    status = args.get("status", "draft")
    campaign = Campaign(
        user_id=ctx.user_id, offer_id=offer.id, name=name, status=status, briefing=briefing
    )
    ctx.session.add(campaign)
    ctx.session.flush()
    state = "started" if status == "started" else "saved as a draft"
    return {
        "campaign_id": campaign.id,
        "name": campaign.name,
        "status": campaign.status,
        "offer_id": offer.id,
        "message": f"The campaign {campaign.name} for {offer.name} is {state}.",
    }


# --- images and video ------------------------------------------------------------------

RATIO = re.compile(r"^([1-9][0-9]?):([1-9][0-9]?)$")


def dimensions(aspect_ratio: str, longest: int = LONGEST_SIDE) -> tuple[int, int]:
    """Pixel size for an aspect ratio, the longer side `longest`, both multiples of 8."""
    match = RATIO.match(aspect_ratio or "")
    if not match:
        raise ToolFailure(f'The aspect ratio {aspect_ratio!r} is not like "4:5".')
    ratio = int(match.group(1)) / int(match.group(2))
    if not 1 / 3 <= ratio <= 3:
        raise ToolFailure("The aspect ratio must be between 1:3 and 3:1.")
    if ratio >= 1:
        return longest, max(8, round(longest / ratio / 8) * 8)
    return max(8, round(longest * ratio / 8) * 8), longest


def _preset(ctx: ToolContext, preset_id: Any) -> ImagePreset:
    """A shared preset or one of the caller's own."""
    if isinstance(preset_id, bool) or not isinstance(preset_id, int):
        raise ToolFailure("image preset id must be a whole number.")
    preset = ctx.session.get(ImagePreset, preset_id)
    if preset is None or preset.user_id not in (None, ctx.user_id):
        raise ToolFailure(f"No image preset with id {preset_id} was found.")
    return preset


def _aspect_ratio(args: dict, preset: ImagePreset | None, default: str) -> str:
    if args.get("aspect_ratio"):
        return args["aspect_ratio"]
    if preset is not None and RATIO.match(preset.aspect_ratio or ""):
        return preset.aspect_ratio
    return default


DRAFT_NOTE = (
    "This is a local draft render (layout, brand colours and the prompt as text), not a "
    "photorealistic image: no image model is configured here. Say so when you show it."
)


def make_image(
    ctx: ToolContext,
    *,
    prompt: str,
    title: str,
    offer: Offer | None,
    preset: ImagePreset | None,
    aspect_ratio: str,
    meta: dict[str, Any] | None = None,
) -> tuple[VisualAsset, ToolResult]:
    """Generate through the configured provider, save a VisualAsset, show it in the chat."""
    width, height = dimensions(aspect_ratio)
    brand = normalise_colours(offer.brand_colors) if offer else ()
    style = ImageStyle(
        preset=preset.name if preset else "",
        description=preset.style if preset else "",
        colors=brand,
        title=title,
    )
    try:
        provider = image_provider(ctx.settings)
        # Reads are done: no transaction stays open while the provider works.
        ctx.end_reads()
        image = provider.generate(prompt, width, height, style)
    except MediaError as error:
        raise ToolFailure(str(error)) from error
    colours = list(brand or (FALLBACK_COLOURS if image.draft else ()))
    asset = VisualAsset(
        user_id=ctx.user_id,
        offer_id=offer.id if offer else None,
        kind="image",
        title=title[:200],
        prompt=prompt,
        preset=(preset.name if preset else "")[:80],
        content_type=image.content_type,
        data=image.data,
        meta={
            "draft": image.draft,
            "provider": image.provider,
            "colors": colours,
            "aspect_ratio": aspect_ratio,
            "width": width,
            "height": height,
            "conversation_id": ctx.conversation_id,
            **(meta or {}),
        },
    )
    ctx.session.add(asset)
    ctx.session.flush()
    url = asset_url(asset.id)
    content = {
        "asset_id": asset.id,
        "title": asset.title,
        "url": url,
        "draft": image.draft,
        "provider": image.provider,
        "aspect_ratio": aspect_ratio,
        "offer_id": asset.offer_id,
        "preset": asset.preset or None,
        "message": "The image is saved and shown to the person in the chat.",
    }
    if image.draft:
        content["note"] = DRAFT_NOTE
    agent_output = {
        "kind": "image",
        "assetId": asset.id,
        "title": asset.title,
        "url": url,
        "draft": image.draft,
        "width": width,
        "height": height,
        "offerId": asset.offer_id,
    }
    return asset, ToolResult(
        content=content,
        visible_rows=[
            {"kind": "agent_output", "content": "", "meta": {"agentOutput": agent_output}}
        ],
    )


def _title_from(prompt: str, limit: int = 80) -> str:
    words = " ".join(prompt.split())
    if len(words) <= limit:
        return words
    return words[: limit - 3].rsplit(" ", 1)[0].rstrip(" ,.:;") + "..."


@action_tool(
    "generate_image",
    "Generate an image from a prompt and save it to the person's visual assets; it is "
    "shown in the chat. Pass offer_id to use the offer's brand colours and file it under "
    "the offer, preset_id for a look (list_image_presets or configure_image) and "
    "aspect_ratio (default: the preset's, else 1:1). Check list_generation_models first: "
    "without an image model this makes a labelled local draft render, not a photo.",
    "generate_image: generate and save an image (or a labelled draft render).",
    properties={
        "prompt": {
            "type": "string",
            "minLength": 1,
            "maxLength": 2000,
            "description": "What the image shows: subject, setting, composition, mood.",
        },
        "offer_id": OFFER_ID,
        "preset_id": PRESET_ID,
        "aspect_ratio": ASPECT_RATIO,
        "title": {"type": "string", "minLength": 1, "maxLength": 200},
    },
    required=("prompt",),
    billable=True,
    label="Made an image",
)
def generate_image(ctx: ToolContext, args: dict) -> ToolResult:
    prompt = _clean(args["prompt"], "image prompt", one_line=False)
    offer = ctx.owned(Offer, args["offer_id"], "offer") if "offer_id" in args else None
    preset = _preset(ctx, args["preset_id"]) if "preset_id" in args else None
    title = " ".join((args.get("title") or "").split()) or _title_from(prompt)
    _asset, result = make_image(
        ctx,
        prompt=prompt,
        title=title,
        offer=offer,
        preset=preset,
        aspect_ratio=_aspect_ratio(args, preset, "1:1"),
        meta={"source": "generate_image"},
    )
    return result


@action_tool(
    "generate_character_portrait",
    "Generate a portrait of a saved character from their description (in their persona's "
    "offer colours when linked) and make it the character's portrait; it is saved to the "
    "visual assets and shown in the chat. preset_id picks a look; the default aspect "
    "ratio is the preset's, else 4:5.",
    "generate_character_portrait: generate and set a character's portrait.",
    properties={
        "character_id": CHARACTER_ID,
        "preset_id": PRESET_ID,
        "aspect_ratio": ASPECT_RATIO,
    },
    required=("character_id",),
    billable=True,
    label="Made a character portrait",
)
def generate_character_portrait(ctx: ToolContext, args: dict) -> ToolResult:
    character = ctx.owned(Character, args["character_id"], "character")
    preset = _preset(ctx, args["preset_id"]) if "preset_id" in args else None
    persona = None
    if character.persona_id is not None:
        persona = ctx.session.scalar(
            select(Persona).where(
                Persona.id == character.persona_id, Persona.user_id == ctx.user_id
            )
        )
    offer = _persona_offer(ctx, persona)
    description = " ".join(character.description.split())
    prompt = f"Portrait of {character.name}" + (f": {description}" if description else ".")
    if persona is not None:
        prompt += f" They represent the audience persona {persona.name}."
    asset, result = make_image(
        ctx,
        prompt=prompt,
        title=f"{character.name}, portrait",
        offer=offer,
        preset=preset,
        aspect_ratio=_aspect_ratio(args, preset, "4:5"),
        meta={"source": "generate_character_portrait", "character_id": character.id},
    )
    previous = character.portrait_asset_id
    character.portrait_asset_id = asset.id
    ctx.session.flush()
    result.content.update(
        {
            "character_id": character.id,
            "previous_portrait_asset_id": previous,
            "message": f"The portrait is saved and is now {character.name}'s portrait.",
        }
    )
    return result


VIDEO_NOT_SET_UP = (
    "Video generation is not set up here, so no video was made. Tell the person plainly. "
    "You can still write the script or a storyboard (create_storyboard) and generate still "
    "images for it."
)


@action_tool(
    "generate_video",
    "Generate a short video from a prompt. Check list_generation_models first: when no "
    "video provider is configured this makes nothing and says so; offer a storyboard "
    "(create_storyboard) or still images instead.",
    "generate_video: generate a video (only where a video provider is set up).",
    properties={
        "prompt": {"type": "string", "minLength": 1, "maxLength": 4000},
        "offer_id": OFFER_ID,
    },
    required=("prompt",),
    billable=True,
    label="Made a video",
)
def generate_video(ctx: ToolContext, args: dict) -> str:
    if "offer_id" in args:
        ctx.owned(Offer, args["offer_id"], "offer")
    if not ctx.settings.video_provider_url:
        return VIDEO_NOT_SET_UP
    return (
        "A video provider is configured, but this version of Loopdesk cannot send it jobs "
        "yet, so no video was made. Tell the person plainly, and offer a storyboard "
        "(create_storyboard) or still images instead."
    )


def _writes_phase(args: dict) -> bool:
    # Back to discovery removes tools; only the switch to build adds the ones that write.
    return args.get("phase") == "build"


@action_tool(
    "set_phase",
    "Switch this conversation's phase. In discovery you can look things up, ask and write "
    "copy; the tools that save, generate or start things (characters, images, storyboards, "
    "campaigns...) appear only in build. Switch to build as soon as the person wants "
    "something saved, generated or started; back to discovery when they are exploring.",
    "set_phase: call it with phase build to get the tools that save, generate or start "
    "things (characters, cast lists, images, storyboards, element sheets, campaigns).",
    properties={"phase": {"enum": ["discovery", "build"]}},
    required=("phase",),
    phase="discovery",
    writes_when=_writes_phase,
    label="Switched the chat's phase",
)
def set_phase(ctx: ToolContext, args: dict) -> dict:
    if ctx.switch_phase is None:
        raise ToolFailure("This conversation has no phase to switch.")
    ctx.switch_phase(args["phase"])
    return {
        "phase": args["phase"],
        "note": "The tools for this phase are available from your next step.",
    }


def exact_memory_operations(instruction: str) -> list[Operation]:
    """What a remember call from a tainted conversation saves: the instruction's facts
    read by fixed rules (no model rewrites them), so the card shows exactly these."""
    try:
        return fallback_operations(instruction)
    except MemoryRefused:
        return []


def _memory_card(args: dict) -> dict:
    operations = exact_memory_operations(str(args.get("instruction", "")))
    return {
        "memory": [
            {"op": operation.op, "fact": operation.fact, "newFact": operation.new_fact}
            for operation in operations
        ]
    }


@action_tool(
    "remember",
    "Remember (or forget) something about the person for every future conversation, e.g. "
    '"remember that I prefer short headlines". Use it ONLY when the person explicitly asks '
    "you to remember or forget something; never on your own initiative.",
    "remember: save or forget what the person explicitly asks you to remember.",
    properties={"instruction": {"type": "string", "minLength": 1, "maxLength": 2000}},
    required=("instruction",),
    phase="discovery",
    held_details=_memory_card,
    label="Updated your memory",
)
def remember(ctx: ToolContext, args: dict) -> dict:
    if ctx.tainted:
        return _remember_exactly(ctx, args["instruction"])
    try:
        outcome = reconcile(
            ctx.session,
            ctx.services.model,
            ctx.settings.fast_model,
            ctx.user_id,
            args["instruction"],
            source="tool",
            actor_id=ctx.user_id,
        )
    except MemoryRefused as refusal:
        raise ToolFailure(str(refusal)) from refusal
    return {"remembered_facts": outcome.facts, "changes": outcome.changes}


def _remember_exactly(ctx: ToolContext, instruction: str) -> dict:
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
