"""Image and video tools: generate an image or a character's portrait through the
configured provider (`app.media.providers`), saved as a visual asset and shown in the
chat; video only where a provider is set up. The provider's MediaError becomes a tool
failure here."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import select

from app.kinds import OutputKind, RowKind
from app.media.providers import (
    GeneratedImage,
    ImageStyle,
    MediaError,
    image_provider,
    normalise_colours,
)
from app.row_meta import AgentOutput
from app.tools.context import ToolContext
from app.tools.groups import IMAGES
from app.tools.read import asset_url
from app.tools.registry import ACTION, Integer, ToolInput, ToolRegistry
from app.tools.results import ToolFailure, ToolResult
from app.tools.workspace_facts import CharacterId, OfferId, clean_text, persona_offer
from app.workspace.images import FALLBACK_COLOURS
from app.workspace.models import Character, ImagePreset, Offer, Persona, VisualAsset

REGISTRY = ToolRegistry(group=IMAGES)

LONGEST_SIDE = 1024
PresetId = Annotated[
    Integer, Field(description="An image preset's id (from list_image_presets or configure_image).")
]
AspectRatio = Annotated[
    str,
    Field(
        pattern="^[1-9][0-9]?:[1-9][0-9]?$",
        description='Width:height such as "1:1", "4:5", "9:16" or "16:9".',
    ),
]


class ImageInput(ToolInput):
    prompt: str = Field(
        min_length=1,
        max_length=2000,
        description="What the image shows: subject, setting, composition, mood.",
    )
    offer_id: OfferId | None = None
    preset_id: PresetId | None = None
    aspect_ratio: AspectRatio | None = None
    title: str | None = Field(None, min_length=1, max_length=200)


class PortraitInput(ToolInput):
    character_id: CharacterId
    preset_id: PresetId | None = None
    aspect_ratio: AspectRatio | None = None


class VideoInput(ToolInput):
    prompt: str = Field(min_length=1, max_length=4000)
    offer_id: OfferId | None = None


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


def _aspect_ratio(asked: str | None, preset: ImagePreset | None, default: str) -> str:
    if asked:
        return asked
    if preset is not None and RATIO.match(preset.aspect_ratio or ""):
        return preset.aspect_ratio
    return default


DRAFT_NOTE = (
    "This is a local draft render (layout, brand colours and the prompt as text), not a "
    "photorealistic image: no image model is configured here. Say so when you show it."
)


def _generated(
    ctx: ToolContext, prompt: str, width: int, height: int, style: ImageStyle
) -> GeneratedImage:
    """The provider's image; its MediaError becomes a failure the model relays."""
    try:
        provider = image_provider(ctx.settings)
        # Reads are done: no transaction stays open while the provider works.
        ctx.end_reads()
        return provider.generate(prompt, width, height, style)
    except MediaError as error:
        raise ToolFailure(str(error)) from error


def _image_result(
    asset: VisualAsset, image: GeneratedImage, aspect_ratio: str, size: tuple[int, int]
) -> ToolResult:
    """What the model reads about a saved image, and the image row the chat shows."""
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
    agent_output: AgentOutput = {
        "kind": OutputKind.IMAGE,
        "assetId": asset.id,
        "title": asset.title,
        "url": url,
        "draft": image.draft,
        "width": size[0],
        "height": size[1],
        "offerId": asset.offer_id,
    }
    return ToolResult(
        content=content,
        visible_rows=[
            {"kind": RowKind.AGENT_OUTPUT, "content": "", "meta": {"agentOutput": agent_output}}
        ],
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
    image = _generated(ctx, prompt, width, height, style)
    colours = list(brand or (FALLBACK_COLOURS if image.draft else ()))
    asset = VisualAsset(
        user_id=ctx.user_id,
        project_id=ctx.project_id,
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
    return asset, _image_result(asset, image, aspect_ratio, (width, height))


def _title_from(prompt: str, limit: int = 80) -> str:
    words = " ".join(prompt.split())
    if len(words) <= limit:
        return words
    return words[: limit - 3].rsplit(" ", 1)[0].rstrip(" ,.:;") + "..."


@REGISTRY.tool(
    name="generate_image",
    description=(
        "Generate an image from a prompt and save it to the person's visual assets; it is shown in "
        "the chat. Pass offer_id to use the offer's brand colours and file it under the offer, "
        "preset_id for a look (list_image_presets or configure_image) and aspect_ratio (default: "
        "the preset's, else 1:1). Check list_generation_models first: without an image model this "
        "makes a labelled local draft render, not a photo."
    ),
    note="generate_image: generate and save an image (or a labelled draft render).",
    category=ACTION,
    input=ImageInput,
    billable=True,
    label="Made an image",
)
def generate_image(ctx: ToolContext, args: ImageInput) -> ToolResult:
    prompt = clean_text(args.prompt, "image prompt", one_line=False)
    offer = ctx.owned(Offer, args.offer_id, "offer") if args.offer_id is not None else None
    preset = _preset(ctx, args.preset_id) if args.preset_id is not None else None
    title = " ".join((args.title or "").split()) or _title_from(prompt)
    _asset, result = make_image(
        ctx,
        prompt=prompt,
        title=title,
        offer=offer,
        preset=preset,
        aspect_ratio=_aspect_ratio(args.aspect_ratio, preset, "1:1"),
        meta={"source": "generate_image"},
    )
    return result


@REGISTRY.tool(
    name="generate_character_portrait",
    description=(
        "Generate a portrait of a saved character from their description (in their persona's offer "
        "colours when linked) and make it the character's portrait; it is saved to the visual "
        "assets and shown in the chat. preset_id picks a look; the default aspect ratio is the "
        "preset's, else 4:5."
    ),
    note="generate_character_portrait: generate and set a character's portrait.",
    category=ACTION,
    input=PortraitInput,
    billable=True,
    label="Made a character portrait",
)
def generate_character_portrait(ctx: ToolContext, args: PortraitInput) -> ToolResult:
    character = ctx.owned(Character, args.character_id, "character")
    preset = _preset(ctx, args.preset_id) if args.preset_id is not None else None
    persona = None
    if character.persona_id is not None:
        persona = ctx.session.scalar(
            select(Persona).where(
                Persona.id == character.persona_id, Persona.project_id == ctx.project_id
            )
        )
    offer = persona_offer(ctx, persona)
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
        aspect_ratio=_aspect_ratio(args.aspect_ratio, preset, "4:5"),
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


@REGISTRY.tool(
    name="generate_video",
    description=(
        "Generate a short video from a prompt. Check list_generation_models first: when no video "
        "provider is configured this makes nothing and says so; offer a storyboard "
        "(create_storyboard) or still images instead."
    ),
    note="generate_video: generate a video (only where a video provider is set up).",
    category=ACTION,
    input=VideoInput,
    billable=True,
    label="Made a video",
)
def generate_video(ctx: ToolContext, args: VideoInput) -> str:
    if args.offer_id is not None:
        ctx.owned(Offer, args.offer_id, "offer")
    if not ctx.settings.video_provider_url:
        return VIDEO_NOT_SET_UP
    return (
        "A video provider is configured, but this version of Loopdesk cannot send it jobs "
        "yet, so no video was made. Tell the person plainly, and offer a storyboard "
        "(create_storyboard) or still images instead."
    )
