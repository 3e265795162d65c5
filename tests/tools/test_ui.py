"""UI tools: one questionnaire card format, and answers checked against the card."""

from __future__ import annotations

import json

import pytest

from app.tools.results import Pause, ToolFailure
from app.workspace.models import Offer, Persona
from tests.tools import SECRET, make_workspace

UI_TOOLS = [
    "select_offer", "select_persona", "select_ad_format", "configure_image",
    "configure_video", "collect_campaign_briefing", "ask_user",
]  # fmt: skip
STEP_KEYS = {"id", "title", "input", "options", "required", "allowFreeText", "maxLength"}


@pytest.fixture
def ws(app):
    workspace = make_workspace(app)
    yield workspace
    workspace.session.close()


def card_of(ws, name: str, args: dict | None = None) -> dict:
    paused = ws.call(name, args)
    assert isinstance(paused, Pause)
    card = paused.card
    assert_card_shape(card)
    json.dumps(card)
    # What the loop adds before storing the card.
    return {**card, "toolUseId": "toolu_1", "tool": name, "status": "awaiting"}


def assert_card_shape(card: dict) -> None:
    assert card["kind"] == "questionnaire"
    assert card["title"] and card["submitLabel"]
    assert "resultKey" in card
    assert card["steps"]
    if card["resultKey"] is not None:
        assert len(card["steps"]) == 1
    for step in card["steps"]:
        assert set(step) >= STEP_KEYS, step
        assert step["input"] in {"single", "multi", "text"}
        for option in step["options"]:
            assert {"label", "value"} <= set(option)
            assert set(option) <= {"label", "value", "description", "thumbnail", "badge"}


def test_every_ui_tool_is_declared_with_a_check_and_a_note(app):
    tools = app.extensions["services"].tools
    for name in UI_TOOLS:
        declared = tools.get(name)
        assert declared.category == "ui"
        assert declared.check_response is not None
        assert declared.note


# --- select_offer ------------------------------------------------------------------------


def test_select_offer_card_has_decorated_offer_options(ws):
    card = card_of(ws, "select_offer", {"prompt": "Which one shall we promote?"})
    assert card["title"] == "Which one shall we promote?"
    assert card["resultKey"] == "offer_id"
    options = card["steps"][0]["options"]
    assert [o["value"] for o in options] == [ws.ids["offer"], ws.ids["other_offer"]]
    assert options[0] == {
        "label": "Ada Coaching",
        "value": ws.ids["offer"],
        "description": "Ada coaching programme for founders.",
        "thumbnail": f"/workspace/assets/{ws.ids['asset']}",
        "badge": "$490",
    }
    assert "thumbnail" not in options[1]
    assert SECRET not in json.dumps(card)


def test_select_offer_without_offers_fails_instead_of_pausing(ws):
    for offer in ws.session.query(Offer).filter_by(user_id=ws.ada.id):
        ws.session.delete(offer)
    ws.session.flush()
    with pytest.raises(ToolFailure, match="/workspace/offers"):
        ws.call("select_offer")


def test_select_offer_answers(ws):
    card = card_of(ws, "select_offer")
    assert ws.check("select_offer", card, {"offer_id": ws.ids["offer"]}) is None
    foreign = ws.check("select_offer", card, {"offer_id": ws.bob_ids["offer"]})
    assert foreign == f"No offer with id {ws.bob_ids['offer']} was found."
    assert ws.check("select_offer", card, {"offer_id": str(ws.ids["offer"])})
    assert ws.check("select_offer", card, {"offer_id": True})
    assert ws.check("select_offer", card, {})
    assert ws.check("select_offer", card, ["offer_id"])


# --- select_persona ----------------------------------------------------------------------


def test_select_persona_card(ws):
    card = card_of(ws, "select_persona")
    assert card["resultKey"] == "persona_id"
    options = {o["value"]: o for o in card["steps"][0]["options"]}
    assert set(options) == {ws.ids["persona"], ws.ids["coffee_persona"]}
    olivia = options[ws.ids["persona"]]
    assert olivia["thumbnail"] == f"/workspace/assets/{ws.ids['portrait']}"
    assert olivia["badge"] == "Ada Coaching"
    assert olivia["description"] == "Runs an agency."


def test_select_persona_filtered_by_offer(ws):
    card = card_of(ws, "select_persona", {"offer_id": ws.ids["other_offer"]})
    assert [o["value"] for o in card["steps"][0]["options"]] == [ws.ids["coffee_persona"]]


def test_select_persona_checks_the_offer_and_emptiness(ws):
    with pytest.raises(ToolFailure) as caught:
        ws.call("select_persona", {"offer_id": ws.bob_ids["offer"]})
    assert str(caught.value) == f"No offer with id {ws.bob_ids['offer']} was found."
    ws.session.query(Persona).filter_by(user_id=ws.ada.id).delete()
    ws.session.flush()
    with pytest.raises(ToolFailure, match="no personas"):
        ws.call("select_persona")


def test_select_persona_answers(ws):
    card = card_of(ws, "select_persona")
    assert ws.check("select_persona", card, {"persona_id": ws.ids["persona"]}) is None
    assert "No persona" in ws.check("select_persona", card, {"persona_id": ws.bob_ids["persona"]})
    assert ws.check("select_persona", card, {"offer_id": ws.ids["offer"]})


# --- select_ad_format --------------------------------------------------------------------


def test_select_ad_format(ws):
    card = card_of(ws, "select_ad_format")
    assert card["resultKey"] == "value"
    values = [o["value"] for o in card["steps"][0]["options"]]
    assert values == ["feed_image", "story_vertical", "carousel", "short_video", "search_text"]
    assert ws.check("select_ad_format", card, {"value": "carousel"}) is None
    assert ws.check("select_ad_format", card, {"value": "billboard"})
    assert ws.check("select_ad_format", card, {"text": "a billboard"})
    assert ws.check("select_ad_format", card, {})


# --- configure_image / configure_video ---------------------------------------------------


def test_configure_image_card_and_answers(ws):
    card = card_of(ws, "configure_image")
    assert card["resultKey"] is None
    steps = {step["id"]: step for step in card["steps"]}
    assert list(steps) == ["preset", "aspect_ratio", "subject"]
    assert [o["label"] for o in steps["preset"]["options"]] == ["Editorial photo", "Ada look"]
    assert [o["value"] for o in steps["aspect_ratio"]["options"]] == ["1:1", "4:5", "9:16", "16:9"]
    assert steps["subject"]["input"] == "text"
    assert steps["subject"]["maxLength"] == 1000
    preset_id = steps["preset"]["options"][0]["value"]
    good = {"preset": preset_id, "aspect_ratio": "4:5", "subject": "A calm founder"}
    assert ws.check("configure_image", card, {"answers": good}) is None
    assert ws.check("configure_image", card, {"answers": {**good, "aspect_ratio": "3:2"}})
    assert ws.check("configure_image", card, {"answers": {**good, "preset": ws.bob_ids["preset"]}})
    assert ws.check("configure_image", card, {"answers": {**good, "subject": "x" * 1001}})
    assert ws.check("configure_image", card, {"answers": {**good, "subject": "   "}})
    missing = {k: v for k, v in good.items() if k != "subject"}
    assert "needs an answer" in ws.check("configure_image", card, {"answers": missing})
    assert ws.check("configure_image", card, {"answers": {**good, "mood": "sunny"}})
    assert ws.check("configure_image", card, good)


def test_configure_image_without_presets_skips_that_step(make_app):
    ws = make_workspace(make_app(), shared_presets=False)
    try:
        from app.workspace.models import ImagePreset

        ws.session.query(ImagePreset).delete()
        ws.session.flush()
        card = card_of(ws, "configure_image")
    finally:
        ws.session.close()
    assert [step["id"] for step in card["steps"]] == ["aspect_ratio", "subject"]


def test_configure_video_card_and_answers(ws):
    card = card_of(ws, "configure_video")
    steps = {step["id"]: step for step in card["steps"]}
    assert list(steps) == ["format", "duration", "script"]
    assert [o["value"] for o in steps["duration"]["options"]] == [6, 15, 30]
    good = {"format": "vertical_9_16", "duration": 15, "script": "Hook, then offer."}
    assert ws.check("configure_video", card, {"answers": good}) is None
    assert ws.check("configure_video", card, {"answers": {**good, "duration": 20}})
    assert ws.check("configure_video", card, {"answers": {**good, "duration": "15"}})
    assert ws.check("configure_video", card, {"answers": {**good, "script": "x" * 2001}})


# --- collect_campaign_briefing -----------------------------------------------------------


def briefing(ws, **changes):
    answers = {
        "goal": "leads",
        "offer": ws.ids["offer"],
        "audience": ws.ids["persona"],
        "channels": ["meta_ads", "email"],
        "budget": "$500 per month",
        "timing": "Start 1 June",
    }
    answers.update(changes)
    return {"answers": {k: v for k, v in answers.items() if v is not None}}


def test_campaign_briefing_card(ws):
    card = card_of(ws, "collect_campaign_briefing")
    assert card["resultKey"] is None
    steps = {step["id"]: step for step in card["steps"]}
    assert list(steps) == ["goal", "offer", "audience", "channels", "budget", "timing", "notes"]
    assert [o["value"] for o in steps["goal"]["options"]] == [
        "leads", "sales", "awareness", "event_signups",
    ]  # fmt: skip
    assert steps["channels"]["input"] == "multi"
    assert [o["value"] for o in steps["channels"]["options"]] == [
        "meta_ads", "google_ads", "email", "organic_social", "landing_page",
    ]  # fmt: skip
    assert steps["audience"]["allowFreeText"] is True
    assert steps["notes"]["required"] is False
    assert steps["offer"]["options"][0]["thumbnail"].startswith("/workspace/assets/")
    assert SECRET not in json.dumps(card)


def test_campaign_briefing_limited_to_a_given_offer(ws):
    card = card_of(ws, "collect_campaign_briefing", {"offer_id": ws.ids["other_offer"]})
    steps = {step["id"]: step for step in card["steps"]}
    assert [o["value"] for o in steps["offer"]["options"]] == [ws.ids["other_offer"]]
    assert steps["offer"]["default"] == ws.ids["other_offer"]
    assert [o["value"] for o in steps["audience"]["options"]] == [ws.ids["coffee_persona"]]
    with pytest.raises(ToolFailure, match="No offer with id"):
        ws.call("collect_campaign_briefing", {"offer_id": ws.bob_ids["offer"]})


def test_campaign_briefing_answers(ws):
    card = card_of(ws, "collect_campaign_briefing")
    name = "collect_campaign_briefing"
    assert ws.check(name, card, briefing(ws)) is None
    assert ws.check(name, card, briefing(ws, audience="Busy founders in Berlin")) is None
    assert ws.check(name, card, briefing(ws, notes="No discounts")) is None
    assert ws.check(name, card, briefing(ws, goal="fame"))
    assert ws.check(name, card, briefing(ws, offer=ws.bob_ids["offer"]))
    assert ws.check(name, card, briefing(ws, channels=["meta_ads", "tv"]))
    assert ws.check(name, card, briefing(ws, channels="email"))
    assert ws.check(name, card, briefing(ws, channels=[]))
    assert ws.check(name, card, briefing(ws, budget="x" * 201))
    assert "needs an answer" in ws.check(name, card, briefing(ws, budget=None))
    assert ws.check(name, card, {"goal": "leads"})


def test_campaign_briefing_answer_rechecks_offer_ownership(ws):
    card = card_of(ws, "collect_campaign_briefing")
    ws.session.delete(ws.session.get(Offer, ws.ids["offer"]))
    ws.session.flush()
    error = ws.check("collect_campaign_briefing", card, briefing(ws))
    assert error == f"No offer with id {ws.ids['offer']} was found."


# --- ask_user ----------------------------------------------------------------------------

OPTIONS = [
    {"label": "Yes", "value": "yes", "description": "Go ahead"},
    {"label": "No", "value": "no"},
]


def test_ask_user_with_options(ws):
    card = card_of(ws, "ask_user", {"question": "Shall I write emails too?", "options": OPTIONS})
    assert card["title"] == "Shall I write emails too?"
    assert card["resultKey"] == "value"
    assert card["freeTextKey"] == "text"
    step = card["steps"][0]
    assert step["input"] == "single"
    assert step["options"] == [
        {"label": "Yes", "value": "yes", "description": "Go ahead"},
        {"label": "No", "value": "no"},
    ]
    assert step["allowFreeText"] is False
    assert ws.check("ask_user", card, {"value": "yes"}) is None
    assert ws.check("ask_user", card, {"value": "maybe"})
    assert ws.check("ask_user", card, {"text": "maybe later"})
    assert ws.check("ask_user", card, {"value": "yes", "text": "and more"})
    assert ws.check("ask_user", card, {})


def test_ask_user_with_options_and_free_text(ws):
    args = {"question": "Tone?", "options": OPTIONS, "allow_free_text": True}
    card = card_of(ws, "ask_user", args)
    assert card["steps"][0]["allowFreeText"] is True
    assert ws.check("ask_user", card, {"value": "no"}) is None
    assert ws.check("ask_user", card, {"text": "Playful but clear"}) is None
    assert ws.check("ask_user", card, {"text": ""})
    assert ws.check("ask_user", card, {"text": "   "})
    assert ws.check("ask_user", card, {"text": "x" * 2001})
    assert ws.check("ask_user", card, {"text": 5})


def test_ask_user_free_text_only(ws):
    card = card_of(ws, "ask_user", {"question": "What is your launch date?"})
    step = card["steps"][0]
    assert step["input"] == "text"
    assert step["options"] == []
    assert ws.check("ask_user", card, {"text": "1 June"}) is None
    assert ws.check("ask_user", card, {"text": "x" * 2000}) is None
    assert ws.check("ask_user", card, {"text": "x" * 2001})
    assert ws.check("ask_user", card, {"value": "1 June"})


def test_ask_user_input_validation(ws):
    declared = ws.services.tools.get("ask_user")
    assert declared.checked_input({}).problem is not None
    assert declared.checked_input({"question": ""}).problem is not None
    assert declared.checked_input({"question": "x" * 501}).problem is not None
    assert (
        declared.checked_input({"question": "Q", "options": [{"label": "A"}]}).problem is not None
    )
    many = [{"label": f"O{i}", "value": f"o{i}"} for i in range(9)]
    assert declared.checked_input({"question": "Q", "options": many}).problem is not None
    assert declared.checked_input({"question": "Q", "allow_free_text": "yes"}).problem is not None
    assert declared.checked_input({"question": "Q", "options": many[:8]}).problem is None
    duplicate = [{"label": "A", "value": "same"}, {"label": "B", "value": "same"}]
    with pytest.raises(ToolFailure, match="different value"):
        ws.call("ask_user", {"question": "Q", "options": duplicate})


@pytest.mark.parametrize("name", UI_TOOLS)
def test_ui_inputs_reject_unknown_and_mistyped_fields(ws, name):
    declared = ws.services.tools.get(name)
    assert declared.checked_input({"question": "Q", "surprise": 1}).problem is not None
    if "prompt" in declared.input_schema["properties"]:
        assert declared.checked_input({"prompt": 3}).problem is not None
        assert declared.checked_input({"prompt": "Pick one"}).problem is None
    if "offer_id" in declared.input_schema["properties"]:
        assert declared.checked_input({"offer_id": "one"}).problem is not None
        assert declared.checked_input({"offer_id": "1"}).arguments == {"offer_id": 1}


@pytest.mark.parametrize("name", UI_TOOLS)
def test_answers_must_be_objects(ws, name):
    args = {"question": "Q?"} if name == "ask_user" else {}
    card = card_of(ws, name, args)
    assert ws.check(name, card, "yes")
    assert ws.check(name, card, None)
