"""Action tools through the real loop: a cast list waits on a confirmation card and is saved
once when allowed (never when declined); a generated image is stored and shown as an <img>
that only its owner can load."""

from __future__ import annotations

import io
import json
import re

from PIL import Image
from sqlalchemy import select

from app.workspace.models import Character, VisualAsset
from tests.factories import add_offer_and_persona, build_phase_chat, user_id_of
from tests.fake_model import Turn, text, tool_use

CAST = {
    "characters": [
        {"name": "Mira Voss", "role": "the sceptic", "description": "Forty, runs a bakery."},
        {"name": "Jon Park", "role": "the convert", "description": "Thirty, owns a gym."},
    ]
}


def _characters(app) -> list[tuple[str, int | None]]:
    with app.extensions["database"].session() as session:
        return [
            (c.name, c.persona_id)
            for c in session.scalars(select(Character).order_by(Character.id)).all()
        ]


def _tool_result(request, tool_use_id):
    for message in request["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block["tool_use_id"] == tool_use_id:
                return block
    raise AssertionError(f"no tool_result for {tool_use_id}")


def _propose(app, chat, fake_model):
    ids = add_offer_and_persona(app, user_id_of(app))
    fake_model.script(
        Turn(
            text("Let me cast a few characters."),
            tool_use(
                "propose_cast_list",
                {"persona_id": ids["persona"], "offer_id": ids["offer"], "count": 2},
                id="toolu_cast",
            ),
        ),
        json.dumps(CAST),  # the fast model's proposal
    )
    chat_id = build_phase_chat(app, chat)
    run = chat.wait(chat.send(chat_id, "Cast some characters for my founder persona"))
    return chat_id, ids, run


def test_a_cast_list_is_a_confirmation_and_is_saved_once_when_allowed(app, chat, fake_model):
    chat_id, ids, run = _propose(app, chat, fake_model)
    assert run["status"] == "awaiting"
    card = chat.rows(chat_id)[-1]["card"]
    assert card["kind"] == "confirmation" and card["tool"] == "propose_cast_list"
    assert card["title"] == "Save these 2 characters?"
    assert [c["name"] for c in card["arguments"]["characters"]] == ["Mira Voss", "Jon Park"]
    assert "Mira Voss (the sceptic)" in card["reason"]
    assert fake_model.requests[1]["model"] == app.extensions["services"].settings.fast_model
    assert _characters(app) == []

    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert "Save these 2 characters?" in page and "Mira Voss (the sceptic)" in page

    fake_model.script("Saved Mira and Jon.")
    response = chat.answer(chat_id, "toolu_cast", {"approved": True})
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"
    assert _characters(app) == [("Mira Voss", ids["persona"]), ("Jon Park", ids["persona"])]
    result = json.loads(_tool_result(fake_model.requests[-1], "toolu_cast")["content"])
    assert [c["name"] for c in result["characters"]] == ["Mira Voss", "Jon Park"]
    assert all(isinstance(c["character_id"], int) for c in result["characters"])

    # Allowing again does nothing: the approval is spent.
    assert chat.answer(chat_id, "toolu_cast", {"approved": True}).status_code == 409
    assert len(_characters(app)) == 2
    assert fake_model.rejections == []


def test_a_declined_cast_list_saves_nothing(app, chat, fake_model):
    chat_id, _, _ = _propose(app, chat, fake_model)
    fake_model.script("Understood, nothing saved.")
    response = chat.answer(chat_id, "toolu_cast", {"approved": False})
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"
    assert _characters(app) == []
    result = json.loads(_tool_result(fake_model.requests[-1], "toolu_cast")["content"])
    assert result["approved"] is False


def test_a_cast_list_the_model_cannot_produce_is_an_error_result(app, chat, fake_model):
    ids = add_offer_and_persona(app, user_id_of(app))
    fake_model.script(
        Turn(
            tool_use(
                "propose_cast_list",
                {"persona_id": ids["persona"], "offer_id": ids["offer"]},
                id="toolu_cast",
            )
        ),
        "not json",
        "still not json",
        "Sorry, that did not work.",
    )
    chat_id = build_phase_chat(app, chat)
    assert chat.wait(chat.send(chat_id, "Cast"))["status"] == "completed"
    block = _tool_result(fake_model.requests[-1], "toolu_cast")
    assert block["is_error"] is True and "could not be produced" in block["content"]
    assert all(row["kind"] != "card" for row in chat.rows(chat_id))
    assert _characters(app) == []


def test_a_generated_image_is_shown_and_only_its_owner_can_load_it(app, chat, fake_model, auth):
    ids = add_offer_and_persona(app, user_id_of(app))
    fake_model.script(
        Turn(
            text("Making a draft."),
            tool_use(
                "generate_image",
                {
                    "prompt": "Founder with coffee at sunrise",
                    "offer_id": ids["offer"],
                    "aspect_ratio": "9:16",
                    "title": "Sunrise <hero>",
                },
                id="toolu_img",
            ),
        ),
        "Here is a draft render.",
    )
    chat_id = build_phase_chat(app, chat)
    assert chat.wait(chat.send(chat_id, "Make an image"))["status"] == "completed"

    shown = [row for row in chat.rows(chat_id) if row["kind"] == "agent_output"]
    assert len(shown) == 1
    out = shown[0]["agentOutput"]
    asset_id = out["assetId"]
    assert out["kind"] == "image" and out["draft"] is True
    assert out["url"] == f"/workspace/assets/{asset_id}"
    result = json.loads(_tool_result(fake_model.requests[-1], "toolu_img")["content"])
    assert result["asset_id"] == asset_id and "is_error" not in result

    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    img = re.search(r"<img [^>]*>", page.split('class="agent-output agent-output-image"')[1])
    assert img, "no <img> in the image row"
    tag = img.group(0)
    assert f'src="/workspace/assets/{asset_id}"' in tag
    assert 'alt="Sunrise &lt;hero&gt;"' in tag  # escaped
    assert "Draft render" in page
    assert "<hero>" not in page

    image = chat.client.get(f"/workspace/assets/{asset_id}")
    assert image.status_code == 200 and image.headers["Content-Type"] == "image/png"
    picture = Image.open(io.BytesIO(image.data))
    assert picture.format == "PNG" and picture.size == (576, 1024)
    with app.extensions["database"].session() as session:
        assert session.get(VisualAsset, asset_id).offer_id == ids["offer"]

    auth.logout()
    auth.create(email="bob@example.com")
    auth.login(email="bob@example.com")
    assert chat.client.get(f"/workspace/assets/{asset_id}").status_code == 404
    assert chat.client.get(f"/chats/{chat_id}").status_code == 404


def test_generate_video_relays_that_it_is_not_set_up(app, chat, fake_model):
    fake_model.script(
        Turn(tool_use("generate_video", {"prompt": "A 15 second reel"}, id="toolu_vid")),
        "Video generation is not set up here.",
    )
    chat_id = build_phase_chat(app, chat)
    assert chat.wait(chat.send(chat_id, "Make a video"))["status"] == "completed"
    block = _tool_result(fake_model.requests[-1], "toolu_vid")
    assert "is_error" not in block
    assert block["content"].startswith("Video generation is not set up here")
