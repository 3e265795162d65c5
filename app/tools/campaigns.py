"""The campaign tool: save a campaign for an offer from its briefing (a draft, or started
when the person said to go ahead; Loopdesk buys and publishes nothing itself)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from app.tools.context import ToolContext
from app.tools.groups import CAMPAIGNS
from app.tools.registry import ACTION, ToolInput, ToolRegistry
from app.tools.results import ToolFailure
from app.tools.workspace_facts import OfferId, clean_text
from app.workspace.models import Campaign, Offer

REGISTRY = ToolRegistry(group=CAMPAIGNS)

MAX_BRIEFING_CHARS = 20_000


class CampaignInput(ToolInput):
    offer_id: OfferId
    name: str = Field(min_length=1, max_length=200)
    # Any answers, at most 40 (sent as maxProperties, as it always was).
    briefing: Annotated[
        dict[str, Any],
        Field(max_length=40),
        WithJsonSchema({"type": "object", "maxProperties": 40}),
    ] = Field(description="The briefing's answers, e.g. goal, audience, channels, budget.")
    status: Literal["draft", "started"] | None = None


@REGISTRY.tool(
    name="start_campaign",
    description=(
        "Save a campaign for an offer from its briefing (goal, audience, channels, budget, timing, "
        'notes, as collected with collect_campaign_briefing). status "draft" (the default) keeps '
        'it for review; "started" records that the person has said to go ahead. Loopdesk does not '
        "buy ads or publish anything itself. Returns the campaign_id (get_campaign_status reports "
        "it)."
    ),
    note="start_campaign: save a campaign (draft or started) from a briefing.",
    category=ACTION,
    input=CampaignInput,
    label="Saved a campaign",
)
def start_campaign(ctx: ToolContext, args: CampaignInput) -> dict[str, Any]:
    offer = ctx.owned(Offer, args.offer_id, "offer")
    name = clean_text(args.name, "campaign's name")
    briefing = args.briefing
    if len(json.dumps(briefing, ensure_ascii=False)) > MAX_BRIEFING_CHARS:
        raise ToolFailure(
            f"The briefing is too long (at most {MAX_BRIEFING_CHARS:,} characters as JSON)."
        )
    status = args.status or "draft"
    campaign = Campaign(
        user_id=ctx.user_id,
        project_id=ctx.project_id,
        offer_id=offer.id,
        name=name,
        status=status,
        briefing=briefing,
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
