"""UI tools: they pause the run and ask the person through a questionnaire card (built
and checked in `app.tools.questionnaire`)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import func, select

from app.row_meta import Card
from app.tools.context import ToolContext
from app.tools.groups import ALWAYS_ON
from app.tools.questionnaire import MAX_OPTIONS, card, check_card_answer, option, step
from app.tools.read import asset_url, available_presets
from app.tools.registry import UI, Boolean, Integer, ResponseCheck, ToolInput, ToolRegistry
from app.tools.results import Pause, ToolFailure
from app.workspace.models import Character, Offer, Persona, VisualAsset

REGISTRY = ToolRegistry(group=ALWAYS_ON)

Prompt = Annotated[
    str,
    Field(
        min_length=1,
        max_length=500,
        description="The question shown on the card; a sensible default is used if omitted.",
    ),
]


class PromptInput(ToolInput):
    prompt: Prompt | None = None


class PersonaChoiceInput(ToolInput):
    prompt: Prompt | None = None
    offer_id: Integer | None = Field(None, description="Only this offer's personas.")


class BriefingInput(ToolInput):
    offer_id: Integer | None = Field(None, description="The offer, when settled.")


class AskOption(ToolInput):
    label: str = Field(min_length=1, max_length=120)
    value: str = Field(min_length=1, max_length=200)
    description: str | None = Field(None, max_length=300)


class AskInput(ToolInput):
    question: str = Field(min_length=1, max_length=500)
    options: list[AskOption] | None = Field(None, max_length=8)
    allow_free_text: Boolean | None = None


NO_OFFERS = (
    "The person has no offers yet, so there is nothing to choose from. Tell them they can "
    "add one at /workspace/offers (or describe it in the chat)."
)


def _short(text: str | None, limit: int = 140) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _title(args: PromptInput | PersonaChoiceInput, default: str) -> str:
    return (args.prompt or "").strip() or default


def _owned_answer(model: type[Any], key: str, label: str) -> ResponseCheck:
    """A check that the answer's id is one of the person's (it may be newer than the card)."""

    def check(ctx: ToolContext, card_spec: Card, result: Any) -> str | None:
        if not isinstance(result, dict) or key not in result:
            return f"The answer must include {key!r}."
        try:
            ctx.owned(model, result[key], label)
        except ToolFailure as failure:
            return str(failure)
        return None

    return check


def check_briefing_answer(ctx: ToolContext, card_spec: Card, result: Any) -> str | None:
    error = check_card_answer(ctx, card_spec, result)
    if error:
        return error
    try:
        ctx.owned(Offer, result["answers"].get("offer"), "offer")
    except ToolFailure as failure:
        return str(failure)
    return None


# --- option sources --------------------------------------------------------------------


def offer_options(ctx: ToolContext, only_offer: int | None = None) -> list[dict[str, Any]]:
    query = select(Offer).where(Offer.project_id == ctx.project_id)
    if only_offer is not None:
        query = query.where(Offer.id == only_offer)
    offers = ctx.session.scalars(query.order_by(Offer.id).limit(MAX_OPTIONS)).all()
    first_images = dict(
        ctx.session.execute(
            select(VisualAsset.offer_id, func.min(VisualAsset.id))
            .where(VisualAsset.project_id == ctx.project_id, VisualAsset.kind == "image")
            .group_by(VisualAsset.offer_id)
        ).all()
    )
    return [
        option(
            offer.id,
            offer.name,
            _short(offer.description),
            thumbnail=asset_url(first_images[offer.id]) if offer.id in first_images else None,
            badge=offer.price,
        )
        for offer in offers
    ]


def persona_options(ctx: ToolContext, offer_id: int | None = None) -> list[dict[str, Any]]:
    query = select(Persona).where(Persona.project_id == ctx.project_id)
    if offer_id is not None:
        query = query.where(Persona.offer_id == offer_id)
    personas = ctx.session.scalars(query.order_by(Persona.id).limit(MAX_OPTIONS)).all()
    offer_names = dict(
        ctx.session.execute(
            select(Offer.id, Offer.name).where(Offer.project_id == ctx.project_id)
        ).all()
    )
    portraits = {
        persona_id: asset_id
        for persona_id, asset_id in ctx.session.execute(
            select(Character.persona_id, func.min(Character.portrait_asset_id))
            .where(
                Character.project_id == ctx.project_id,
                Character.persona_id.is_not(None),
                Character.portrait_asset_id.is_not(None),
            )
            .group_by(Character.persona_id)
        ).all()
        if persona_id is not None and asset_id is not None
    }
    return [
        option(
            persona.id,
            persona.name,
            _short(persona.description),
            thumbnail=asset_url(portraits[persona.id]) if persona.id in portraits else None,
            badge=offer_names.get(persona.offer_id)
            if offer_id is None and persona.offer_id is not None
            else None,
        )
        for persona in personas
    ]


# --- the tools -------------------------------------------------------------------------


@REGISTRY.tool(
    name="select_offer",
    description=(
        "Show the person their offers as cards and let them pick one. Use it when you need to know "
        'which offer the work is for and they have not said. The run pauses; you get {"offer_id": '
        "<id>} back. Fails if they have no offers yet."
    ),
    note="select_offer: let the person pick one of their offers.",
    category=UI,
    input=PromptInput,
    check_response=_owned_answer(Offer, "offer_id", "offer"),
    label="Asked you to choose an offer",
)
def select_offer(ctx: ToolContext, args: PromptInput) -> Pause:
    options = offer_options(ctx)
    if not options:
        raise ToolFailure(NO_OFFERS)
    steps = [step("offer", "Offer", "single", options)]
    return Pause(
        card(
            _title(args, "Which offer is this for?"),
            steps,
            submit_label="Use this offer",
            result_key="offer_id",
        )
    )


@REGISTRY.tool(
    name="select_persona",
    description=(
        "Show the person their audience personas and let them pick one (only one offer's personas "
        'when offer_id is given). The run pauses; you get {"persona_id": <id>} back. Fails if '
        "there are no personas to choose from."
    ),
    note="select_persona: let the person pick an audience persona.",
    category=UI,
    input=PersonaChoiceInput,
    check_response=_owned_answer(Persona, "persona_id", "persona"),
    label="Asked you to choose a persona",
)
def select_persona(ctx: ToolContext, args: PersonaChoiceInput) -> Pause:
    offer_id = None
    if args.offer_id is not None:
        offer_id = ctx.owned(Offer, args.offer_id, "offer").id
    options = persona_options(ctx, offer_id)
    if not options:
        where = "for that offer " if offer_id is not None else ""
        raise ToolFailure(
            f"The person has no personas {where}yet. Tell them they can add one at "
            "/workspace/personas, or ask them to describe their audience."
        )
    steps = [step("persona", "Persona", "single", options)]
    return Pause(
        card(
            _title(args, "Who is this for?"),
            steps,
            submit_label="Use this persona",
            result_key="persona_id",
        )
    )


AD_FORMATS = [
    option(
        "feed_image", "Feed image", "A single image post in the feed (1:1 or 4:5).", badge="Image"
    ),
    option(
        "story_vertical",
        "Story / reel (vertical)",
        "Full-screen 9:16 for stories and reels.",
        badge="9:16",
    ),
    option(
        "carousel",
        "Carousel",
        "Several swipeable cards that tell a short story.",
        badge="2-10 cards",
    ),
    option(
        "short_video",
        "Short video",
        "A 6-30 second video with a hook in the first seconds.",
        badge="Video",
    ),
    option(
        "search_text",
        "Text-only search ad",
        "Headlines and descriptions for search results.",
        badge="Text",
    ),
]


@REGISTRY.tool(
    name="select_ad_format",
    description=(
        "Let the person pick an ad format: feed_image, story_vertical, carousel, short_video or "
        'search_text. The run pauses; you get {"value": "<format>"} back.'
    ),
    note="select_ad_format: let the person pick an ad format.",
    category=UI,
    input=PromptInput,
    check_response=check_card_answer,
    label="Asked you to choose an ad format",
)
def select_ad_format(ctx: ToolContext, args: PromptInput) -> Pause:
    steps = [step("format", "Ad format", "single", [dict(opt) for opt in AD_FORMATS])]
    return Pause(
        card(_title(args, "Which ad format?"), steps, submit_label="Choose", result_key="value")
    )


ASPECT_RATIOS = [
    option("1:1", "Square 1:1", "Feed posts."),
    option("4:5", "Portrait 4:5", "Takes more of the mobile feed."),
    option("9:16", "Vertical 9:16", "Stories and reels."),
    option("16:9", "Landscape 16:9", "Web banners and video."),
]


@REGISTRY.tool(
    name="configure_image",
    description=(
        "Ask the person how an image should look before generating it: a preset (look), an aspect "
        'ratio and what it should show. The run pauses; you get {"answers": {"preset": <preset '
        'id>, "aspect_ratio": "4:5", "subject": "..."}} back (no preset when none exist).'
    ),
    note="configure_image: ask for an image's preset, aspect ratio and subject.",
    category=UI,
    input=PromptInput,
    check_response=check_card_answer,
    label="Asked you how the image should look",
)
def configure_image(ctx: ToolContext, args: PromptInput) -> Pause:
    steps = []
    presets = available_presets(ctx)
    if presets:
        steps.append(
            step(
                "preset",
                "Look",
                "single",
                [
                    option(p.id, p.name, _short(p.description), badge=p.aspect_ratio)
                    for p in presets[:MAX_OPTIONS]
                ],
            )
        )
    steps.append(
        step("aspect_ratio", "Aspect ratio", "single", [dict(opt) for opt in ASPECT_RATIOS])
    )
    steps.append(
        step(
            "subject",
            "What should the image show?",
            "text",
            max_length=1000,
            placeholder="A founder drinking coffee at sunrise, calm and focused",
        )
    )
    return Pause(card(_title(args, "Set up the image"), steps, submit_label="Use these settings"))


VIDEO_FORMATS = [
    option("vertical_9_16", "Vertical 9:16", "Stories, reels and shorts."),
    option("square_1_1", "Square 1:1", "Feed video."),
    option("landscape_16_9", "Landscape 16:9", "YouTube and web."),
]
DURATIONS = [
    option(6, "6 seconds", "A bumper: one idea, one line."),
    option(15, "15 seconds", "Hook, benefit, call to action."),
    option(30, "30 seconds", "Room for a short story."),
]


@REGISTRY.tool(
    name="configure_video",
    description=(
        "Ask the person how a video should be made before scripting or generating it: format, "
        "duration (6, 15 or 30 seconds) and the script or idea. The run pauses; you get "
        '{"answers": {"format": "vertical_9_16", "duration": 15, "script": "..."}} back.'
    ),
    note="configure_video: ask for a video's format, duration and idea.",
    category=UI,
    input=PromptInput,
    check_response=check_card_answer,
    label="Asked you how the video should be made",
)
def configure_video(ctx: ToolContext, args: PromptInput) -> Pause:
    steps = [
        step("format", "Format", "single", [dict(opt) for opt in VIDEO_FORMATS]),
        step("duration", "Duration", "single", [dict(opt) for opt in DURATIONS]),
        step(
            "script",
            "Script or idea",
            "text",
            placeholder="What happens, what is said, and the call to action",
        ),
    ]
    return Pause(card(_title(args, "Set up the video"), steps, submit_label="Use these settings"))


GOALS = [
    option("leads", "Leads", "Collect contacts to follow up."),
    option("sales", "Sales", "Sell the offer directly."),
    option("awareness", "Awareness", "Get known by the right people."),
    option("event_signups", "Event sign-ups", "Fill a webinar, workshop or launch."),
]
CHANNELS = [
    option("meta_ads", "Meta ads", "Facebook and Instagram."),
    option("google_ads", "Google ads", "Search and display."),
    option("email", "Email", "The person's own list."),
    option("organic_social", "Organic social", "Posts, no ad spend."),
    option("landing_page", "Landing page", "A page the campaign sends people to."),
]


@REGISTRY.tool(
    name="collect_campaign_briefing",
    description=(
        "Collect a campaign briefing from the person in one multi-step card: goal, offer, "
        "audience, channels, budget, timing and notes. Use it before start_campaign when these are "
        "not already known. Pass offer_id when the offer is settled. The run pauses; you get "
        '{"answers": {"goal", "offer", "audience", "channels", "budget", "timing", "notes"}} back '
        "(audience is a persona id or the person's own words)."
    ),
    note="collect_campaign_briefing: a multi-step campaign briefing card.",
    category=UI,
    input=BriefingInput,
    check_response=check_briefing_answer,
    label="Asked you for a campaign briefing",
)
def collect_campaign_briefing(ctx: ToolContext, args: BriefingInput) -> Pause:
    offer_id = None
    if args.offer_id is not None:
        offer_id = ctx.owned(Offer, args.offer_id, "offer").id
    offers = offer_options(ctx, offer_id)
    if not offers:
        raise ToolFailure(NO_OFFERS)
    personas = persona_options(ctx, offer_id)
    audience_title = "Who is it for?"
    audience = (
        step(
            "audience",
            audience_title,
            "single",
            personas,
            allow_free_text=True,
            max_length=500,
            placeholder="Or describe the audience",
        )
        if personas
        else step(
            "audience", audience_title, "text", max_length=500, placeholder="Describe the audience"
        )
    )
    steps = [
        step("goal", "What is the goal?", "single", [dict(opt) for opt in GOALS]),
        step("offer", "Which offer?", "single", offers, default=offer_id),
        audience,
        step("channels", "Which channels?", "multi", [dict(opt) for opt in CHANNELS]),
        step("budget", "Budget", "text", max_length=200, placeholder="$500 per month"),
        step(
            "timing",
            "Start date and timing",
            "text",
            max_length=200,
            placeholder="Start 1 June, run for 4 weeks",
        ),
        step(
            "notes",
            "Anything else?",
            "text",
            required=False,
            placeholder="Constraints, must-haves, things to avoid",
        ),
    ]
    return Pause(card("Campaign briefing", steps, submit_label="Save briefing"))


@REGISTRY.tool(
    name="ask_user",
    description=(
        "Ask the person a question when you need a decision or detail you cannot look up. Give up "
        "to 8 options for a quick choice, or no options for a free-text answer; set "
        "allow_free_text to accept typed answers as well as options. The run pauses; you get "
        '{"value": "<option value>"} or {"text": "<typed answer>"} back. Ask one thing at a time.'
    ),
    note="ask_user: ask the person a question (choices and/or free text).",
    category=UI,
    input=AskInput,
    check_response=check_card_answer,
    label="Asked you a question",
)
def ask_user(ctx: ToolContext, args: AskInput) -> Pause:
    options = [
        option(item.value, item.label, item.description or "") for item in args.options or []
    ]
    values = [item["value"] for item in options]
    if len(set(values)) != len(values):
        raise ToolFailure("Each option of ask_user needs a different value.")
    question = args.question.strip() or args.question
    if options:
        only = step(
            "answer",
            question,
            "single",
            options,
            allow_free_text=bool(args.allow_free_text),
            placeholder="Or type an answer",
        )
    else:
        only = step("answer", question, "text", placeholder="Type your answer")
    return Pause(
        card(question, [only], submit_label="Send", result_key="value", free_text_key="text")
    )
