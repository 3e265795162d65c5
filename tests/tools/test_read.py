"""Read tools: each returns the caller's data, and never anyone else's."""

from __future__ import annotations

import dataclasses
import json

import pytest

from app.tools.results import ToolFailure
from tests.tools import SECRET, make_workspace

READ_TOOLS = [
    "list_offers", "get_offer", "list_personas", "get_persona", "list_visual_assets",
    "get_chat_outputs", "list_offer_outputs", "get_output", "get_campaign_status",
    "list_image_presets", "list_generation_models", "read_attachment", "fetch_url",
]  # fmt: skip


@pytest.fixture
def ws(app):
    workspace = make_workspace(app)
    yield workspace
    workspace.session.close()


def test_every_read_tool_is_declared_without_approval_and_with_a_note(app):
    tools = app.extensions["services"].tools
    for name in READ_TOOLS:
        declared = tools.get(name)
        assert declared is not None, name
        assert declared.category == "read"
        assert not declared.needs_approval_when_tainted
        assert declared.note and "\n" not in declared.note
        assert len(declared.description) > 40
        assert declared.untrusted == (name in {"read_attachment", "fetch_url"})


def test_a_tool_is_never_entered_with_a_transaction_open(ws):
    """A handler may fetch or ask a model: `invoke` refuses to enter one while the
    caller's transaction is open (a programming error, not a result for the model)."""
    from sqlalchemy import text

    from app.tools.invoke import invoke

    list_offers = ws.services.tools.get("list_offers")
    ws.session.execute(text("SELECT 1"))  # a read begins a transaction
    assert ws.session.in_transaction()
    with pytest.raises(RuntimeError, match="list_offers was called with a transaction open"):
        invoke(list_offers, ws.ctx, {})
    ws.session.commit()
    assert not invoke(list_offers, ws.ctx, {}).is_error


def test_list_offers_lists_only_the_callers_offers(ws):
    result = ws.call("list_offers").content
    assert [offer["id"] for offer in result["offers"]] == [ws.ids["offer"], ws.ids["other_offer"]]
    assert result["offers"][0] == {
        "id": ws.ids["offer"],
        "name": "Ada Coaching",
        "price": "$490",
        "description": "Ada coaching programme for founders.",
    }
    assert SECRET not in json.dumps(result)


def test_get_offer_returns_the_offer_with_its_personas_and_assets(ws):
    result = ws.call("get_offer", {"offer_id": ws.ids["offer"]}).content
    assert result["name"] == "Ada Coaching"
    assert result["audience"] == "Founders"
    assert result["brand_colors"] == ["#2f6f5e"]
    assert result["personas"] == [{"id": ws.ids["persona"], "name": "Ada Olivia"}]
    assert result["visual_assets"] == [
        {"id": ws.ids["asset"], "title": "Ada hero", "kind": "image"}
    ]
    json.dumps(result)


def test_list_personas_lists_all_or_one_offers(ws):
    everyone = ws.call("list_personas").content
    assert {p["id"] for p in everyone["personas"]} == {ws.ids["persona"], ws.ids["coffee_persona"]}
    filtered = ws.call("list_personas", {"offer_id": ws.ids["offer"]}).content
    assert [p["id"] for p in filtered["personas"]] == [ws.ids["persona"]]
    assert filtered["personas"][0]["offer_id"] == ws.ids["offer"]


def test_get_persona_returns_the_persona_in_full(ws):
    result = ws.call("get_persona", {"persona_id": ws.ids["persona"]}).content
    assert result["name"] == "Ada Olivia"
    assert result["pains"] == "No time"
    assert result["goals"] == "Calm mornings"
    assert result["offer_name"] == "Ada Coaching"


def test_list_visual_assets_has_urls_and_no_image_bytes(ws):
    everything = ws.call("list_visual_assets").content
    assert {a["id"] for a in everything["assets"]} == {ws.ids["asset"], ws.ids["portrait"]}
    for_offer = ws.call("list_visual_assets", {"offer_id": ws.ids["offer"]}).content
    assert for_offer["assets"] == [
        {
            "id": ws.ids["asset"],
            "title": "Ada hero",
            "kind": "image",
            "preset": "Editorial photo",
            "offer_id": ws.ids["offer"],
            "url": f"/workspace/assets/{ws.ids['asset']}",
        }
    ]
    json.dumps(everything)  # no bytes anywhere


def test_get_chat_outputs_lists_this_conversations_outputs(ws):
    result = ws.call("get_chat_outputs").content
    assert [o["id"] for o in result["outputs"]] == [ws.ids["output"]]
    assert result["outputs"][0]["agent"] == "ad_copy"
    assert result["outputs"][0]["created_at"].endswith("Z")


def test_list_offer_outputs_spans_conversations(ws):
    result = ws.call("list_offer_outputs", {"offer_id": ws.ids["offer"]}).content
    assert {o["id"] for o in result["outputs"]} == {ws.ids["output"], ws.ids["older_output"]}
    assert set(result["outputs"][0]) == {"id", "agent", "title", "created_at"}


def test_get_output_returns_full_content(ws):
    result = ws.call("get_output", {"output_id": ws.ids["output"]}).content
    assert result["content"] == {"headline": "Ada headline"}
    assert result["title"] == "Ada ads"


def test_get_campaign_status(ws):
    result = ws.call("get_campaign_status", {"campaign_id": ws.ids["campaign"]}).content
    assert result["name"] == "Ada launch"
    assert result["status"] == "draft"
    assert result["briefing"] == {
        "goal": "leads",
        "channels": ["meta_ads", "email"],
        "budget": "$500",
    }
    assert result["created_at"] and result["updated_at"]


def test_list_image_presets_shared_and_own(ws):
    result = ws.call("list_image_presets").content
    names = [(p["name"], p["shared"]) for p in result["presets"]]
    assert names == [("Editorial photo", True), ("Ada look", False)]


def test_list_generation_models_reports_plainly(ws):
    result = ws.call("list_generation_models").content
    assert result["images"]["available"] is True
    assert result["images"]["provider"] == "local-draft"
    assert result["video"]["available"] is False
    assert "No video generation provider" in result["video"]["description"]

    settings = ws.services.settings.model_copy(
        update={"video_provider_url": "https://video.example.com/v1"}
    )
    ws.ctx.services = dataclasses.replace(ws.services, settings=settings)
    configured = ws.call("list_generation_models").content
    assert configured["video"]["available"] is False
    assert configured["video"]["provider"] == "video.example.com"
    assert "cannot send it jobs yet" in configured["video"]["description"]


FOREIGN = [
    ("get_offer", "offer_id", "offer", "offer"),
    ("list_personas", "offer_id", "offer", "offer"),
    ("list_visual_assets", "offer_id", "offer", "offer"),
    ("list_offer_outputs", "offer_id", "offer", "offer"),
    ("get_persona", "persona_id", "persona", "persona"),
    ("get_output", "output_id", "output", "output"),
    ("get_campaign_status", "campaign_id", "campaign", "campaign"),
    ("read_attachment", "attachment_id", "attachment", "attachment"),
]


@pytest.mark.parametrize(("name", "arg", "kind", "label"), FOREIGN)
def test_foreign_ids_are_not_found_and_reveal_nothing(ws, name, arg, kind, label):
    foreign_id = ws.bob_ids[kind]
    with pytest.raises(ToolFailure) as caught:
        ws.call(name, {arg: foreign_id})
    assert str(caught.value) == f"No {label} with id {foreign_id} was found."
    assert SECRET not in str(caught.value)

    with pytest.raises(ToolFailure) as missing:
        ws.call(name, {arg: 999_999})
    assert str(missing.value) == f"No {label} with id 999999 was found."


@pytest.mark.parametrize(("name", "arg", "kind", "label"), FOREIGN)
def test_input_is_validated(ws, name, arg, kind, label):
    declared = ws.services.tools.get(name)

    def problem(arguments):
        return declared.checked_input(arguments).problem

    assert problem({arg: f"#{ws.ids[kind]}"})
    assert problem({arg: True})
    assert problem({arg: 1, "extra": 1})
    assert problem([arg])
    assert problem({arg: ws.ids[kind]}) is None
    assert declared.checked_input({arg: str(ws.ids[kind])}).arguments == {arg: ws.ids[kind]}
    if declared.input_schema["required"]:
        assert problem({})


def test_argument_free_tools_reject_arguments(ws):
    for name in ("list_offers", "get_chat_outputs", "list_image_presets", "list_generation_models"):
        assert ws.services.tools.get(name).checked_input({"offer_id": 1}).problem
    fetch = ws.services.tools.get("fetch_url")
    assert fetch.checked_input({}).problem
    assert fetch.checked_input({"url": ""}).problem
    assert fetch.checked_input({"url": 5}).problem


def test_arguments_the_input_model_refuses_are_an_error_for_the_model(ws):
    """What reaches `invoke` unchecked (the loop checks the input first) and does not fit
    the tool's input model is answered like any invalid input, not as a crash."""
    from app.tools.invoke import invoke

    ws.session.commit()
    result = invoke(ws.services.tools.get("get_offer"), ws.ctx, {"offer_id": "seven"})
    assert result.is_error
    assert result.content.startswith("Invalid input for get_offer at offer_id: ")
