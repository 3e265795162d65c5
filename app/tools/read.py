"""Read tools: instant lookups in the caller's workspace. Their results are hidden rows."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import or_, select

from app.tools.context import ToolContext
from app.tools.groups import CAMPAIGNS, IMAGES, WORKSPACE
from app.tools.registry import READ, Integer, NoInput, ToolInput, ToolRegistry
from app.workspace.models import (
    Campaign,
    ImagePreset,
    Offer,
    Output,
    Persona,
    VisualAsset,
)

REGISTRY = ToolRegistry(group=WORKSPACE)

MAX_LISTED = 100

OfferId = Annotated[Integer, Field(description="The offer's id (from list_offers).")]


class OfferInput(ToolInput):
    offer_id: OfferId


class PersonasInput(ToolInput):
    offer_id: OfferId | None = Field(None, description="Only this offer's personas.")


class PersonaInput(ToolInput):
    persona_id: Integer = Field(description="The persona's id.")


class AssetsInput(ToolInput):
    offer_id: OfferId | None = Field(None, description="Only this offer's assets.")


class OutputInput(ToolInput):
    output_id: Integer = Field(description="The output's id.")


class CampaignInput(ToolInput):
    campaign_id: Integer = Field(description="The campaign's id.")


def _short(text: str | None, limit: int = 200) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _when(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") + "Z" if moment else None


def asset_url(asset_id: int) -> str:
    return f"/workspace/assets/{asset_id}"


# --- offers and personas ---------------------------------------------------------------


@REGISTRY.tool(
    name="list_offers",
    description=(
        "List the person's offers (products or services they market): id, name, price and a short "
        "description. Use it to find an offer's id before calling get_offer or any tool that takes "
        "offer_id. To let the person pick one themselves, use select_offer instead."
    ),
    note="list_offers: the person's offers (ids, names, prices).",
    category=READ,
    input=NoInput,
    label="Looked up your offers",
)
def list_offers(ctx: ToolContext, args: NoInput) -> dict[str, Any]:
    offers = ctx.session.scalars(
        select(Offer).where(Offer.project_id == ctx.project_id).order_by(Offer.id).limit(MAX_LISTED)
    ).all()
    return {
        "offers": [
            {
                "id": offer.id,
                "name": offer.name,
                "price": offer.price,
                "description": _short(offer.description),
            }
            for offer in offers
        ]
    }


@REGISTRY.tool(
    name="get_offer",
    description=(
        "Get one offer in full: name, description, audience, price, brand colours, and the ids and "
        "names of its personas and visual assets."
    ),
    note="get_offer: one offer in full, with its personas and visual assets.",
    category=READ,
    input=OfferInput,
    label="Read an offer",
)
def get_offer(ctx: ToolContext, args: OfferInput) -> dict[str, Any]:
    offer = ctx.owned(Offer, args.offer_id, "offer")
    personas = ctx.session.execute(
        select(Persona.id, Persona.name)
        .where(Persona.project_id == ctx.project_id, Persona.offer_id == offer.id)
        .order_by(Persona.id)
    ).all()
    assets = ctx.session.execute(
        select(VisualAsset.id, VisualAsset.title, VisualAsset.kind)
        .where(VisualAsset.project_id == ctx.project_id, VisualAsset.offer_id == offer.id)
        .order_by(VisualAsset.id)
        .limit(MAX_LISTED)
    ).all()
    return {
        **offer.as_dict(),
        "personas": [{"id": row.id, "name": row.name} for row in personas],
        "visual_assets": [{"id": row.id, "title": row.title, "kind": row.kind} for row in assets],
        "updated_at": _when(offer.updated_at),
    }


@REGISTRY.tool(
    name="list_personas",
    description=(
        "List the person's audience personas: id, name, the offer they belong to and a short "
        "description. Pass offer_id to list only that offer's personas. To let the person pick "
        "one, use select_persona instead."
    ),
    note="list_personas: audience personas, optionally for one offer.",
    category=READ,
    input=PersonasInput,
    label="Looked up your personas",
)
def list_personas(ctx: ToolContext, args: PersonasInput) -> dict[str, Any]:
    query = select(Persona).where(Persona.project_id == ctx.project_id)
    if args.offer_id is not None:
        offer = ctx.owned(Offer, args.offer_id, "offer")
        query = query.where(Persona.offer_id == offer.id)
    personas = ctx.session.scalars(query.order_by(Persona.id).limit(MAX_LISTED)).all()
    return {
        "personas": [
            {
                "id": persona.id,
                "name": persona.name,
                "offer_id": persona.offer_id,
                "description": _short(persona.description),
            }
            for persona in personas
        ]
    }


@REGISTRY.tool(
    name="get_persona",
    description="Get one persona in full: who they are, their pains and goals, and their offer.",
    note="get_persona: one persona in full (description, pains, goals).",
    category=READ,
    input=PersonaInput,
    label="Read a persona",
)
def get_persona(ctx: ToolContext, args: PersonaInput) -> dict[str, Any]:
    persona = ctx.owned(Persona, args.persona_id, "persona")
    offer_name = None
    if persona.offer_id is not None:
        offer_name = ctx.session.scalar(
            select(Offer.name).where(
                Offer.id == persona.offer_id, Offer.project_id == ctx.project_id
            )
        )
    return {
        "id": persona.id,
        "name": persona.name,
        "offer_id": persona.offer_id,
        "offer_name": offer_name,
        "description": persona.description,
        "pains": persona.pains,
        "goals": persona.goals,
    }


# --- assets and outputs ----------------------------------------------------------------


@REGISTRY.tool(
    name="list_visual_assets",
    description=(
        "List the person's saved images and videos (newest first): id, title, kind, preset, "
        "offer_id and the URL where the person can see it. Pass offer_id to list one offer's "
        "assets. Image data itself is not returned."
    ),
    note="list_visual_assets: saved images and videos, optionally for one offer.",
    category=READ,
    input=AssetsInput,
    label="Looked up your images and videos",
)
def list_visual_assets(ctx: ToolContext, args: AssetsInput) -> dict[str, Any]:
    query = select(
        VisualAsset.id,
        VisualAsset.title,
        VisualAsset.kind,
        VisualAsset.preset,
        VisualAsset.offer_id,
        VisualAsset.untrusted_sources,
    ).where(VisualAsset.project_id == ctx.project_id)
    if args.offer_id is not None:
        offer = ctx.owned(Offer, args.offer_id, "offer")
        query = query.where(VisualAsset.offer_id == offer.id)
    rows = ctx.session.execute(query.order_by(VisualAsset.id.desc()).limit(MAX_LISTED)).all()
    return {
        "assets": [
            {
                "id": row.id,
                "title": row.title,
                "kind": row.kind,
                "preset": row.preset,
                "offer_id": row.offer_id,
                "url": asset_url(row.id),
            }
            for row in rows
            if ctx.saw(row, "visual_asset")
        ]
    }


def _output_summary(output: Output) -> dict[str, Any]:
    return {
        "id": output.id,
        "agent": output.agent,
        "title": output.title,
        "offer_id": output.offer_id,
        "created_at": _when(output.created_at),
    }


@REGISTRY.tool(
    name="get_chat_outputs",
    description=(
        "List the outputs (quizzes, ad copy, emails, landing pages...) saved in this conversation: "
        "id, agent, title, offer_id. Use get_output for an output's full content."
    ),
    note="get_chat_outputs: outputs saved in this conversation.",
    category=READ,
    input=NoInput,
    label="Looked up this chat's results",
)
def get_chat_outputs(ctx: ToolContext, args: NoInput) -> dict[str, Any]:
    outputs = ctx.session.scalars(
        select(Output)
        .where(Output.project_id == ctx.project_id, Output.conversation_id == ctx.conversation_id)
        .order_by(Output.id)
        .limit(MAX_LISTED)
    ).all()
    return {"outputs": [_output_summary(ctx.saw(output)) for output in outputs]}


@REGISTRY.tool(
    name="list_offer_outputs",
    description=(
        "List the outputs saved for one of the person's offers, from any conversation (newest "
        "first): id, agent, title, created_at. Use it to reuse or adapt earlier work, e.g. pass "
        "ids as reference_output_ids to an agent, or read one with get_output."
    ),
    note="list_offer_outputs: saved outputs for any offer, from every conversation.",
    category=READ,
    input=OfferInput,
    label="Looked up an offer's saved results",
)
def list_offer_outputs(ctx: ToolContext, args: OfferInput) -> dict[str, Any]:
    offer = ctx.owned(Offer, args.offer_id, "offer")
    outputs = ctx.session.scalars(
        select(Output)
        .where(Output.project_id == ctx.project_id, Output.offer_id == offer.id)
        .order_by(Output.id.desc())
        .limit(MAX_LISTED)
    ).all()
    return {
        "offer_id": offer.id,
        "outputs": [
            {
                "id": output.id,
                "agent": output.agent,
                "title": output.title,
                "created_at": _when(output.created_at),
            }
            for output in outputs
        ],
    }


@REGISTRY.tool(
    name="get_output",
    description=(
        "Get one saved output in full (its complete content), e.g. to revise it or stay consistent "
        "with it."
    ),
    note="get_output: one saved output's full content.",
    category=READ,
    input=OutputInput,
    label="Read a saved result",
)
def get_output(ctx: ToolContext, args: OutputInput) -> dict[str, Any]:
    output = ctx.saw(ctx.owned(Output, args.output_id, "output"))
    return {**_output_summary(output), "content": output.content}


# --- campaigns, presets, generation ----------------------------------------------------


def _briefing_summary(briefing: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for key, value in list((briefing or {}).items())[:20]:
        if isinstance(value, str):
            summary[key] = _short(value)
        elif isinstance(value, list):
            summary[key] = [_short(str(item), 80) for item in value[:10]]
        elif isinstance(value, dict):
            summary[key] = _short(", ".join(f"{k}: {v}" for k, v in value.items()))
        else:
            summary[key] = value
    return summary


@REGISTRY.tool(
    name="get_campaign_status",
    description=(
        "Get a campaign's name, status (draft, running...), offer, a summary of its briefing and "
        "when it was created and last updated."
    ),
    note="get_campaign_status: a campaign's status and briefing summary.",
    category=READ,
    input=CampaignInput,
    label="Checked a campaign",
    group=CAMPAIGNS,
)
def get_campaign_status(ctx: ToolContext, args: CampaignInput) -> dict[str, Any]:
    campaign = ctx.saw(ctx.owned(Campaign, args.campaign_id, "campaign"))
    return {
        "id": campaign.id,
        "name": campaign.name,
        "status": campaign.status,
        "offer_id": campaign.offer_id,
        "briefing": _briefing_summary(campaign.briefing),
        "created_at": _when(campaign.created_at),
        "updated_at": _when(campaign.updated_at),
    }


@REGISTRY.tool(
    name="list_image_presets",
    description=(
        "List the image presets (looks) available for generated images: shared ones and the "
        "person's own, with id, name, description, style and default aspect ratio."
    ),
    note="list_image_presets: looks available for generated images.",
    category=READ,
    input=NoInput,
    label="Looked up the image styles",
    group=IMAGES,
)
def list_image_presets(ctx: ToolContext, args: NoInput) -> dict[str, Any]:
    presets = available_presets(ctx)
    return {
        "presets": [
            {
                "id": preset.id,
                "name": preset.name,
                "description": _short(preset.description),
                "style": preset.style,
                "aspect_ratio": preset.aspect_ratio,
                "shared": preset.user_id is None,
            }
            for preset in presets
        ]
    }


def available_presets(ctx: ToolContext) -> list[ImagePreset]:
    """Shared presets (no owner) and the caller's own, shared first."""
    return list(
        ctx.session.scalars(
            select(ImagePreset)
            .where(or_(ImagePreset.user_id.is_(None), ImagePreset.user_id == ctx.user_id))
            .order_by(ImagePreset.user_id.is_not(None), ImagePreset.id)
            .limit(MAX_LISTED)
        ).all()
    )


@REGISTRY.tool(
    name="list_generation_models",
    description=(
        "Say what image and video generation is available right now, so you can set the person's "
        "expectations before generating anything."
    ),
    note="list_generation_models: which image and video generation is available.",
    category=READ,
    input=NoInput,
    label="Checked what can be generated",
    group=IMAGES,
)
def list_generation_models(ctx: ToolContext, args: NoInput) -> dict[str, Any]:
    from urllib.parse import urlsplit

    settings = ctx.settings
    if settings.image_provider_url:
        host = urlsplit(settings.image_provider_url).netloc or settings.image_provider_url
        images = {
            "available": True,
            "provider": f"{settings.image_model} at {host}",
            "model": settings.image_model,
            "draft": False,
            "description": f"Images are generated by {settings.image_model} through an "
            f"OpenAI-compatible images API at {host}.",
        }
    else:
        images = {
            "available": True,
            "provider": "local-draft",
            "model": None,
            "draft": True,
            "description": "No image model is configured: a local draft renderer makes simple "
            "layout drafts in the offer's brand colours with the title and prompt, labelled "
            "as drafts. Useful for direction and composition; not a photorealistic image.",
        }
    # Like generate_video: a configured provider is named, but no job can be sent to it.
    if settings.video_provider_url:
        host = urlsplit(settings.video_provider_url).netloc or settings.video_provider_url
        video = {
            "available": False,
            "provider": host,
            "description": f"A video provider is configured ({host}), but this version cannot "
            "send it jobs yet. Scripts and storyboards can still be written, but no video "
            "file can be produced.",
        }
    else:
        video = {
            "available": False,
            "provider": None,
            "description": "No video generation provider is configured. Scripts and "
            "storyboards can still be written, but no video file can be produced.",
        }
    return {"images": images, "video": video}
