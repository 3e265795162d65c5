"""Action tools called directly with a ToolContext: each does its job for the caller, checks
every id it is given, and writes nothing when it fails. The fast-model tools talk to the
fake model server."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image
from sqlalchemy import func, select

from app.events import AgentToken, Timeline
from app.tools import campaigns, characters, sheets
from app.tools.results import Pause, ToolFailure, ToolResult
from app.workspace.models import Campaign, Character, ImagePreset, Output, VisualAsset
from tests.fake_model import Turn, text
from tests.tools import SECRET, make_workspace

ACTION_TOOLS = [
    "generate_image", "generate_video", "create_storyboard", "generate_character_portrait",
    "save_character", "propose_cast_list", "generate_element_sheet", "start_campaign",
    "link_character_persona",
]  # fmt: skip
BILLABLE = {
    "generate_image",
    "generate_video",
    "generate_character_portrait",
    "propose_cast_list",
    "generate_element_sheet",
    "create_storyboard",
}


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


@pytest.fixture
def ws(app):
    workspace = make_workspace(app)
    yield workspace
    workspace.session.close()


def counts(ws) -> dict[str, int]:
    """How many rows of each kind the tools write, for everyone."""
    return {
        model.__name__: ws.session.scalar(select(func.count()).select_from(model))
        for model in (Character, Campaign, VisualAsset, Output)
    }


def fails(ws, name, args, message=None):
    """The call fails with a ToolFailure (the message checked when given), writing nothing."""
    before = counts(ws)
    with pytest.raises(ToolFailure) as caught:
        ws.call(name, args)
    if message is not None:
        assert str(caught.value) == message
    assert SECRET not in str(caught.value)
    assert counts(ws) == before
    return str(caught.value)


def invalid(ws, name, args) -> str:
    problem = ws.services.tools.get(name).checked_input(args).problem
    assert problem, f"{name} accepted {args!r}"
    return problem


def png_size(data: bytes) -> tuple[int, int]:
    image = Image.open(io.BytesIO(data))
    image.load()
    assert image.format == "PNG"
    return image.size


# --- declarations ----------------------------------------------------------------------


def test_every_action_tool_is_declared_for_the_build_phase(app):
    tools = app.extensions["services"].tools
    for name in ACTION_TOOLS:
        declared = tools.get(name)
        assert declared is not None, name
        assert declared.category == "action"
        assert declared.phase == "build"
        assert declared.needs_approval_when_tainted is True
        assert declared.billable == (name in BILLABLE), name
        assert declared.note and "\n" not in declared.note and declared.note.startswith(name)
        assert len(declared.description) > 80
    assert tools.get("propose_cast_list").on_approved is characters.save_cast
    # The way into build, and memory the person asks for, must be reachable in discovery.
    for name in ("set_phase", "remember"):
        assert tools.get(name).category == "action" and tools.get(name).phase == "discovery"


# --- save_character and link_character_persona -----------------------------------------


def test_save_character_with_and_without_a_persona(ws):
    plain = ws.call("save_character", {"name": "  Mira  Voss ", "description": "A baker."}).content
    linked = ws.call(
        "save_character",
        {"name": "Jon", "description": "Runs a gym.", "persona_id": ws.ids["persona"]},
    ).content
    assert plain["name"] == "Mira Voss" and plain["persona_id"] is None
    assert linked["persona_id"] == ws.ids["persona"]
    assert "Ada Olivia" in linked["message"]
    saved = ws.session.get(Character, linked["character_id"])
    assert (saved.user_id, saved.name, saved.description) == (ws.ada.id, "Jon", "Runs a gym.")


@pytest.mark.parametrize(
    "args",
    [
        {"description": "no name"},
        {"name": "Mira"},
        {"name": 7, "description": "x"},
        {"name": "", "description": "x"},
        {"name": "Mira", "description": "x", "persona_id": "three"},
        {"name": "Mira", "description": "x", "extra": 1},
    ],
)
def test_save_character_input_is_validated(ws, args):
    assert "save_character" in invalid(ws, "save_character", args)


def test_save_character_refuses_blank_names_and_foreign_personas(ws):
    fails(ws, "save_character", {"name": "   ", "description": "x"})
    foreign = ws.bob_ids["persona"]
    fails(
        ws,
        "save_character",
        {"name": "Mira", "description": "x", "persona_id": foreign},
        f"No persona with id {foreign} was found.",
    )
    fails(
        ws,
        "save_character",
        {"name": "Mira", "description": "x", "persona_id": 999_999},
        "No persona with id 999999 was found.",
    )


def _character(ws, name="Mira", persona_id=None) -> int:
    return ws.call(
        "save_character",
        {"name": name, "description": "A baker in her forties, flour on her apron."}
        | ({"persona_id": persona_id} if persona_id else {}),
    ).content["character_id"]


def test_link_character_persona(ws):
    character_id = _character(ws)
    result = ws.call(
        "link_character_persona",
        {"character_id": character_id, "persona_id": ws.ids["coffee_persona"]},
    ).content
    assert result["previous_persona_id"] is None
    assert ws.session.get(Character, character_id).persona_id == ws.ids["coffee_persona"]
    assert "Ada Ben" in result["message"]


@pytest.mark.parametrize(
    "args", [{}, {"character_id": 1}, {"persona_id": 1}, {"character_id": "one", "persona_id": 1}]
)
def test_link_character_persona_input_is_validated(ws, args):
    invalid(ws, "link_character_persona", args)


def test_link_character_persona_checks_both_ids(ws):
    mine = _character(ws)
    bobs = ws.session.scalar(select(Character.id).where(Character.user_id == ws.bob.id))
    fails(
        ws,
        "link_character_persona",
        {"character_id": bobs, "persona_id": ws.ids["persona"]},
        f"No character with id {bobs} was found.",
    )
    fails(
        ws,
        "link_character_persona",
        {"character_id": mine, "persona_id": ws.bob_ids["persona"]},
        f"No persona with id {ws.bob_ids['persona']} was found.",
    )
    assert ws.session.get(Character, mine).persona_id is None
    assert ws.session.get(Character, bobs).persona_id == ws.bob_ids["persona"]


# --- start_campaign --------------------------------------------------------------------

BRIEFING = {"goal": "leads", "channels": ["meta_ads"], "budget": "$300", "timing": "June"}


def test_start_campaign_saves_a_draft_that_get_campaign_status_reports(ws):
    result = ws.call(
        "start_campaign",
        {"offer_id": ws.ids["offer"], "name": "June leads", "briefing": BRIEFING},
    ).content
    assert result["status"] == "draft" and "draft" in result["message"]
    status = ws.call("get_campaign_status", {"campaign_id": result["campaign_id"]}).content
    assert status["name"] == "June leads"
    assert status["status"] == "draft"
    assert status["offer_id"] == ws.ids["offer"]
    assert status["briefing"]["budget"] == "$300"
    assert ws.session.get(Campaign, result["campaign_id"]).user_id == ws.ada.id


def test_start_campaign_can_mark_it_started(ws):
    result = ws.call(
        "start_campaign",
        {"offer_id": ws.ids["offer"], "name": "Go", "briefing": {}, "status": "started"},
    ).content
    assert ws.call("get_campaign_status", {"campaign_id": result["campaign_id"]}).content[
        "status"
    ] == ("started")


@pytest.mark.parametrize(
    "args",
    [
        {"name": "x", "briefing": {}},
        {"offer_id": 1, "briefing": {}},
        {"offer_id": 1, "name": "x"},
        {"offer_id": 1, "name": "x", "briefing": "goal: leads"},
        {"offer_id": 1, "name": "x", "briefing": [1]},
        {"offer_id": 1, "name": "x", "briefing": {}, "status": "running"},
        {"offer_id": 1, "name": "", "briefing": {}},
    ],
)
def test_start_campaign_input_is_validated(ws, args):
    invalid(ws, "start_campaign", args)


def test_start_campaign_refuses_foreign_offers_blank_names_and_huge_briefings(ws):
    foreign = ws.bob_ids["offer"]
    fails(
        ws,
        "start_campaign",
        {"offer_id": foreign, "name": "x", "briefing": {}},
        f"No offer with id {foreign} was found.",
    )
    fails(ws, "start_campaign", {"offer_id": ws.ids["offer"], "name": "  ", "briefing": {}})
    huge = {"notes": "x" * (campaigns.MAX_BRIEFING_CHARS + 1)}
    assert "too long" in fails(
        ws, "start_campaign", {"offer_id": ws.ids["offer"], "name": "x", "briefing": huge}
    )


# --- images (the local draft renderer) -------------------------------------------------


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [("1:1", 1.0), ("4:5", 0.8), ("9:16", 9 / 16), ("16:9", 16 / 9), ("3:2", 1.5)],
)
def test_generate_image_draft_is_a_png_shaped_by_the_aspect_ratio(ws, ratio, expected):
    result = ws.call(
        "generate_image", {"prompt": "A calm kitchen at sunrise", "aspect_ratio": ratio}
    )
    assert isinstance(result, ToolResult) and not result.is_error
    asset = ws.session.get(VisualAsset, result.content["asset_id"])
    width, height = png_size(asset.data)
    assert max(width, height) == 1024
    assert abs(width / height - expected) < 0.01
    assert asset.content_type == "image/png"
    assert asset.meta["draft"] is True and asset.meta["provider"] == "local-draft"
    assert (asset.meta["width"], asset.meta["height"]) == (width, height)


def test_generate_image_saves_the_asset_and_shows_it(ws):
    result = ws.call(
        "generate_image",
        {
            "prompt": "Founder with coffee, morning light",
            "offer_id": ws.ids["offer"],
            "preset_id": ws.ids["preset"],
            "title": "Morning hero",
        },
    )
    content = result.content
    asset = ws.session.get(VisualAsset, content["asset_id"])
    assert asset.user_id == ws.ada.id and asset.offer_id == ws.ids["offer"]
    assert asset.title == "Morning hero" and asset.kind == "image"
    assert asset.prompt == "Founder with coffee, morning light"
    assert asset.preset == "Ada look"
    assert asset.meta["colors"] == ["#2f6f5e"]
    # The preset's aspect ratio (4:5) applies when none is given.
    assert asset.meta["aspect_ratio"] == "4:5"
    assert png_size(asset.data) == (816, 1024)
    assert content["url"] == f"/workspace/assets/{asset.id}"
    assert content["draft"] is True and "draft" in content["note"]
    assert result.visible_rows == [
        {
            "kind": "agent_output",
            "content": "",
            "meta": {
                "agentOutput": {
                    "kind": "image",
                    "assetId": asset.id,
                    "title": "Morning hero",
                    "url": f"/workspace/assets/{asset.id}",
                    "draft": True,
                    "width": 816,
                    "height": 1024,
                    "offerId": ws.ids["offer"],
                }
            },
        }
    ]
    json.dumps(content)  # no bytes for the model


def test_generate_image_takes_shared_presets_and_titles_from_the_prompt(ws):
    shared = ws.session.scalar(select(ImagePreset.id).where(ImagePreset.user_id.is_(None)))
    prompt = "word " * 40
    result = ws.call("generate_image", {"prompt": prompt, "preset_id": shared})
    asset = ws.session.get(VisualAsset, result.content["asset_id"])
    assert asset.preset == "Editorial photo" and asset.offer_id is None
    assert asset.title.endswith("...") and len(asset.title) <= 80


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"prompt": ""},
        {"prompt": 5},
        {"prompt": "x", "aspect_ratio": "4x5"},
        {"prompt": "x", "aspect_ratio": "0:5"},
        {"prompt": "x", "offer_id": "one"},
        {"prompt": "x", "preset_id": 1.5},
        {"prompt": "x" * 2001},
    ],
)
def test_generate_image_input_is_validated(ws, args):
    invalid(ws, "generate_image", args)


def test_generate_image_refuses_foreign_ids_and_odd_ratios(ws):
    fails(
        ws,
        "generate_image",
        {"prompt": "x", "offer_id": ws.bob_ids["offer"]},
        f"No offer with id {ws.bob_ids['offer']} was found.",
    )
    fails(
        ws,
        "generate_image",
        {"prompt": "x", "preset_id": ws.bob_ids["preset"]},
        f"No image preset with id {ws.bob_ids['preset']} was found.",
    )
    fails(ws, "generate_image", {"prompt": "x", "preset_id": 999_999})
    assert "between 1:3 and 3:1" in fails(
        ws, "generate_image", {"prompt": "x", "aspect_ratio": "1:9"}
    )
    fails(ws, "generate_image", {"prompt": "   "})


def test_generate_character_portrait_sets_the_portrait(ws):
    character_id = _character(ws, persona_id=ws.ids["persona"])
    result = ws.call("generate_character_portrait", {"character_id": character_id})
    character = ws.session.get(Character, character_id)
    assert character.portrait_asset_id == result.content["asset_id"]
    asset = ws.session.get(VisualAsset, character.portrait_asset_id)
    assert asset.title == "Mira, portrait"
    assert "flour on her apron" in asset.prompt
    # The persona's offer gives the colours and the filing.
    assert asset.offer_id == ws.ids["offer"] and asset.meta["colors"] == ["#2f6f5e"]
    assert asset.meta["character_id"] == character_id
    assert png_size(asset.data) == (816, 1024)  # portraits default to 4:5
    assert result.visible_rows[0]["meta"]["agentOutput"]["assetId"] == asset.id

    again = ws.call(
        "generate_character_portrait", {"character_id": character_id, "aspect_ratio": "1:1"}
    )
    assert again.content["previous_portrait_asset_id"] == asset.id
    assert ws.session.get(Character, character_id).portrait_asset_id == again.content["asset_id"]


def test_generate_character_portrait_checks_its_ids(ws):
    invalid(ws, "generate_character_portrait", {})
    invalid(ws, "generate_character_portrait", {"character_id": "one"})
    bobs = ws.session.scalar(select(Character.id).where(Character.user_id == ws.bob.id))
    fails(
        ws,
        "generate_character_portrait",
        {"character_id": bobs},
        f"No character with id {bobs} was found.",
    )
    mine = _character(ws)
    fails(
        ws,
        "generate_character_portrait",
        {"character_id": mine, "preset_id": ws.bob_ids["preset"]},
    )
    assert ws.session.get(Character, mine).portrait_asset_id is None


# --- video -----------------------------------------------------------------------------


def test_generate_video_says_plainly_that_it_is_not_set_up(ws):
    result = ws.call("generate_video", {"prompt": "A 15 second reel", "offer_id": ws.ids["offer"]})
    assert not result.is_error
    assert result.content.startswith("Video generation is not set up here")
    invalid(ws, "generate_video", {})
    fails(
        ws,
        "generate_video",
        {"prompt": "x", "offer_id": ws.bob_ids["offer"]},
        f"No offer with id {ws.bob_ids['offer']} was found.",
    )
    assert counts(ws)["VisualAsset"] == 4


# --- fast-model tools ------------------------------------------------------------------


def element_sheet(title="Ada visual world") -> dict:
    return {
        "title": title,
        "summary": "Calm, warm, morning light.",
        "palette": [
            {"name": "Forest", "hex": "#2f6f5e", "use": "Backgrounds"},
            {"name": "Sun", "hex": "#f4d35e", "use": "Accents"},
        ],
        "visual_elements": [{"element": "Steam", "description": "Rising from a cup."}],
        "wardrobe": [{"item": "Linen shirt", "description": "Relaxed."}],
        "props": [{"item": "Notebook", "description": "Open, handwritten."}],
        "locations": [{"place": "Kitchen", "description": "Plants, wood."}],
        "lighting": "Soft sunrise from the side.",
        "mood": "Unhurried.",
        "avoid": ["Neon"],
    }


def storyboard(scenes=3) -> dict:
    return {
        "title": "Calm mornings in 15 seconds",
        "format": "vertical 9:16, 15 seconds",
        "concept": "From chaos to calm.",
        "scenes": [
            {
                "number": n,
                "shot": "Close-up",
                "visual": f"Scene {n}",
                "voiceover": "" if n == 1 else f"Line {n}",
                "duration_seconds": 5,
            }
            for n in range(1, scenes + 1)
        ],
        "call_to_action": "Book a call",
    }


def test_element_sheet_for_an_offer_is_saved_and_shown(ws, fake_model):
    fake_model.script(json.dumps(element_sheet()))
    result = ws.call(
        "generate_element_sheet", {"offer_id": ws.ids["offer"], "focus": "Spring campaign"}
    )
    output = ws.session.get(Output, result.content["output_id"])
    assert output.agent == "element-sheet" and output.title == "Ada visual world"
    assert output.offer_id == ws.ids["offer"]
    assert output.conversation_id == ws.ids["conversation"]
    assert output.content == element_sheet()
    shown = result.visible_rows[0]
    assert shown["kind"] == "agent_output" and shown["content"] == ""
    assert shown["meta"]["agentOutput"] == {
        "outputId": output.id,
        "agent": "element-sheet",
        "agentName": "Element sheet",
        "title": "Ada visual world",
        "offerId": ws.ids["offer"],
        "content": element_sheet(),
    }
    request = fake_model.requests[-1]
    assert request["model"] == ws.services.settings.fast_model
    # The answer's shape travels in the request: the schema is the forced tool's input.
    assert request["tool_choice"] == {"type": "tool", "name": "submit_element_sheet"}
    assert request["tools"][0]["input_schema"] == sheets.ELEMENT_SHEET_SCHEMA
    asked = request["messages"][0]["content"]
    assert "Ada Coaching" in asked and "Spring campaign" in asked
    assert SECRET not in json.dumps(request)
    assert "no code fences" in request["system"]  # the shared guidelines are appended
    # Streamed to the timeline, not to the chat body.
    assert Timeline(0, "writing", "started", agent="Element sheet") in ws.events
    assert Timeline(0, "writing", "done", agent="Element sheet") in ws.events
    assert any(isinstance(event, AgentToken) for event in ws.events)


def test_element_sheet_for_a_character_uses_its_persona_and_offer(ws, fake_model):
    character_id = _character(ws, persona_id=ws.ids["persona"])
    fake_model.script("```json\n" + json.dumps(element_sheet("Mira")) + "\n```")
    result = ws.call("generate_element_sheet", {"character_id": character_id})
    output = ws.session.get(Output, result.content["output_id"])
    assert output.offer_id == ws.ids["offer"]
    assert output.content["character_id"] == character_id
    asked = fake_model.requests[-1]["messages"][0]["content"]
    assert "flour on her apron" in asked and "Ada Olivia" in asked


def test_a_malformed_answer_is_retried_once_with_the_problem(ws, fake_model):
    broken = element_sheet()
    del broken["palette"]
    fake_model.script("Sure! Here it is: {not json", json.dumps(element_sheet()))
    result = ws.call("generate_element_sheet", {"offer_id": ws.ids["offer"]})
    assert ws.session.get(Output, result.content["output_id"]) is not None
    retry = fake_model.requests[-1]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[1]["content"] == "Sure! Here it is: {not json"
    assert "not valid JSON" in retry[2]["content"]


def test_two_malformed_answers_fail_and_save_nothing(ws, fake_model):
    broken = element_sheet()
    del broken["palette"]
    fake_model.script("not json at all", json.dumps(broken), json.dumps(broken))
    message = fails(ws, "generate_element_sheet", {"offer_id": ws.ids["offer"]})
    assert message.startswith("The element sheet could not be produced")
    assert "palette" in message
    assert len(fake_model.requests) == 3, "two retries at most"


def test_element_sheet_needs_an_id_of_the_callers(ws, fake_model):
    fails(ws, "generate_element_sheet", {})
    fails(
        ws,
        "generate_element_sheet",
        {"offer_id": ws.bob_ids["offer"]},
        f"No offer with id {ws.bob_ids['offer']} was found.",
    )
    bobs = ws.session.scalar(select(Character.id).where(Character.user_id == ws.bob.id))
    fails(ws, "generate_element_sheet", {"character_id": bobs})
    invalid(ws, "generate_element_sheet", {"offer_id": "one"})
    invalid(ws, "generate_element_sheet", {"focus": 3})
    assert fake_model.requests == []  # no model call for a refused request


def test_storyboard_is_saved_with_the_requested_scene_count(ws, fake_model):
    # Four scenes when five were asked for: retried with the reason, then right.
    fake_model.script(json.dumps(storyboard(4)), json.dumps(storyboard(5)))
    result = ws.call(
        "create_storyboard",
        {
            "offer_id": ws.ids["offer"],
            "persona_id": ws.ids["persona"],
            "format": "vertical 9:16",
            "scenes": 5,
            "direction": "Open on a messy desk",
        },
    )
    output = ws.session.get(Output, result.content["output_id"])
    assert output.agent == "storyboard" and len(output.content["scenes"]) == 5
    assert output.offer_id == ws.ids["offer"]
    assert result.visible_rows[0]["meta"]["agentOutput"]["agentName"] == "Storyboard"
    first, retry = fake_model.requests
    assert "exactly 5 scenes" in first["messages"][0]["content"]
    assert "Open on a messy desk" in first["messages"][0]["content"]
    assert "Ada Olivia" in first["messages"][0]["content"]
    assert "scenes" in retry["messages"][-1]["content"]


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"offer_id": 1, "scenes": 2},
        {"offer_id": 1, "scenes": 13},
        {"offer_id": 1, "scenes": "six"},
        {"offer_id": 1, "format": ""},
        {"offer_id": 1, "persona_id": None},
    ],
)
def test_storyboard_input_is_validated(ws, args):
    invalid(ws, "create_storyboard", args)


def test_storyboard_refuses_foreign_ids(ws, fake_model):
    fails(ws, "create_storyboard", {"offer_id": ws.bob_ids["offer"]})
    fails(
        ws,
        "create_storyboard",
        {"offer_id": ws.ids["offer"], "persona_id": ws.bob_ids["persona"]},
        f"No persona with id {ws.bob_ids['persona']} was found.",
    )
    assert fake_model.requests == []


def test_storyboard_that_never_validates_saves_nothing(ws, fake_model):
    fake_model.script(json.dumps(storyboard(2)), json.dumps({"title": "x"}))
    assert "could not be produced" in fails(ws, "create_storyboard", {"offer_id": ws.ids["offer"]})


CAST = {
    "characters": [
        {"name": "Mira Voss", "role": "the sceptic", "description": "Forty, runs a bakery."},
        {"name": "Jon Park", "role": "the convert", "description": "Thirty, gym owner."},
    ]
}


def test_propose_cast_list_asks_before_saving(ws, fake_model):
    fake_model.script(json.dumps(CAST))
    pause = ws.call(
        "propose_cast_list",
        {
            "persona_id": ws.ids["persona"],
            "offer_id": ws.ids["offer"],
            "count": 2,
            "direction": "Warm, local",
        },
    )
    assert isinstance(pause, Pause)
    card = pause.card
    assert card["kind"] == "confirmation"
    assert card["title"] == "Save these 2 characters?"
    assert card["arguments"] == {
        "persona_id": ws.ids["persona"],
        "offer_id": ws.ids["offer"],
        "characters": CAST["characters"],
    }
    assert "Mira Voss (the sceptic)" in card["reason"] and "Jon Park" in card["reason"]
    assert counts(ws)["Character"] == 2  # one each from the fixtures: nothing saved yet
    asked = fake_model.requests[-1]["messages"][0]["content"]
    assert "exactly 2 characters" in asked and "Warm, local" in asked
    assert "Ada Olive" in asked  # the persona's existing character, not to be repeated

    saved = ws.call("propose_cast_list", card["arguments"], approved=True).content
    assert [c["name"] for c in saved["characters"]] == ["Mira Voss", "Jon Park"]
    for item in saved["characters"]:
        character = ws.session.get(Character, item["character_id"])
        assert character.user_id == ws.ada.id
        assert character.persona_id == ws.ids["persona"]
    assert (
        "Forty, runs a bakery."
        in ws.session.get(Character, saved["characters"][0]["character_id"]).description
    )


def test_propose_cast_list_default_count_is_three(ws, fake_model):
    three = {"characters": CAST["characters"] + [{"name": "Ana", "role": "r", "description": "d"}]}
    fake_model.script(json.dumps(three))
    pause = ws.call(
        "propose_cast_list", {"persona_id": ws.ids["persona"], "offer_id": ws.ids["offer"]}
    )
    assert pause.card["title"] == "Save these 3 characters?"


@pytest.mark.parametrize(
    "args",
    [
        {"persona_id": 1},
        {"offer_id": 1},
        {"persona_id": 1, "offer_id": 1, "count": 0},
        {"persona_id": 1, "offer_id": 1, "count": 7},
        {"persona_id": 1, "offer_id": 1, "count": "three"},
        {"persona_id": 1, "offer_id": 1, "direction": ["x"]},
    ],
)
def test_propose_cast_list_input_is_validated(ws, args):
    invalid(ws, "propose_cast_list", args)


def test_propose_cast_list_refuses_foreign_ids_without_asking_the_model(ws, fake_model):
    fails(
        ws,
        "propose_cast_list",
        {"persona_id": ws.bob_ids["persona"], "offer_id": ws.ids["offer"]},
        f"No persona with id {ws.bob_ids['persona']} was found.",
    )
    fails(
        ws,
        "propose_cast_list",
        {"persona_id": ws.ids["persona"], "offer_id": ws.bob_ids["offer"]},
        f"No offer with id {ws.bob_ids['offer']} was found.",
    )
    assert fake_model.requests == []


def test_propose_cast_list_fails_after_two_bad_answers(ws, fake_model):
    fake_model.script(Turn(text("{}")), Turn(text(json.dumps({"characters": []}))))
    with pytest.raises(ToolFailure, match="cast list could not be produced"):
        ws.call("propose_cast_list", {"persona_id": ws.ids["persona"], "offer_id": ws.ids["offer"]})


def test_an_approved_cast_is_checked_again(ws):
    before = counts(ws)
    with pytest.raises(ToolFailure, match="malformed"):
        ws.call(
            "propose_cast_list", {"persona_id": ws.ids["persona"], "offer_id": 1}, approved=True
        )
    with pytest.raises(ToolFailure, match="No persona"):
        ws.call(
            "propose_cast_list",
            {"persona_id": ws.bob_ids["persona"], "offer_id": 1, "characters": CAST["characters"]},
            approved=True,
        )
    assert counts(ws) == before


def test_what_a_tool_saves_in_a_tainted_conversation_records_the_untrusted_sources(ws):
    sources = [{"tool": "fetch_url", "url": "https://example.com/pricing"}]
    ws.ctx.untrusted_sources = list(sources)
    result = ws.call(
        "start_campaign",
        {"offer_id": ws.ids["offer"], "name": "From a page", "briefing": {"goal": "leads"}},
    )
    assert ws.session.get(Campaign, result.content["campaign_id"]).untrusted_sources == sources


def test_a_tool_that_breaks_midway_saves_nothing_and_says_so_with_a_reference(ws, monkeypatch):
    calls = []

    def breaks_on_the_second(value, what, one_line=True):
        calls.append(value)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return value

    monkeypatch.setattr(characters, "clean_text", breaks_on_the_second)
    before = counts(ws)
    outcome = ws.outcome(
        "propose_cast_list",
        {"persona_id": ws.ids["persona"], "offer_id": ws.ids["offer"], **CAST},
        approved=True,
    )
    assert outcome.is_error
    assert outcome.content.startswith("The propose_cast_list tool failed unexpectedly (reference ")
    assert "disk on fire" not in outcome.content
    assert counts(ws) == before
