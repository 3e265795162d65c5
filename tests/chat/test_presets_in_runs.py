"""A chat started from a preset, on the fake model server: the system prompt holds the
preset's instructions (the person's, below the house's rules and their own instructions),
the model is offered only the preset's tool groups (the cards that ask the person always),
and a tool outside them is refused as unknown even when the model calls it by name."""

from __future__ import annotations

import pytest

from app.chat.presets import CLOSE_TAG, OPEN_TAG
from tests.fake_model import Turn, text, tool_use

WRITING = {"quiz", "ad_copy", "email_sequence", "landing_page"}


@pytest.fixture
def app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, web_search="on")


def _offered(request: dict) -> set[str]:
    return {tool["name"] for tool in request.get("tools", [])}


def _system(request: dict) -> str:
    system = request["system"]
    return system if isinstance(system, str) else "".join(block["text"] for block in system)


def _preset(chat, **body) -> int:
    made = chat.post("/api/presets", {"name": "Engineers' blog", **body})
    assert made.status_code == 201, made.get_json()
    return made.get_json()["id"]


def _chat_from(chat, preset_id: int) -> int:
    made = chat.post("/api/chats", {"preset_id": preset_id})
    assert made.status_code == 201, made.get_json()
    return made.get_json()["id"]


def test_a_run_gets_the_presets_instructions_and_only_its_tool_groups(chat, client, fake_model):
    assert (
        client.put(
            "/api/memory", json={"instructions": "British English."}, headers=chat.auth.headers()
        ).status_code
        == 200
    )
    preset = _preset(chat, instructions="Write for engineers.", tool_groups=["writing"])
    fake_model.script(
        Turn(tool_use("generate_image", {"prompt": "a launch poster"}, id="toolu_image")),
        Turn(text("I can only write here.")),
    )
    chat_id = _chat_from(chat, preset)
    run = chat.wait(chat.send(chat_id, "Make a poster"))
    assert run["status"] == "completed", run

    first = fake_model.requests[0]
    offered = _offered(first)
    assert offered >= WRITING
    assert {"select_offer", "ask_user"} <= offered
    assert not offered & {"generate_image", "list_offers", "start_campaign", "fetch_url"}
    assert "web_search" not in offered  # off with the preset, though the setting is on
    system = _system(first)
    block = '## The preset "Engineers\' blog"'
    assert f"{OPEN_TAG}\nWrite for engineers.\n{CLOSE_TAG}" in system
    # Below the house's prompt and the person's own instructions.
    assert system.index("British English.") < system.index(block)
    assert system.index("You are Loopdesk") < system.index(block)

    # Called by name anyway, the tool that is off is unknown to this chat.
    result = fake_model.requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "There is no tool named generate_image." in str(result["content"])


def test_a_chat_without_a_preset_or_whose_preset_was_deleted_gets_every_tool(chat, fake_model):
    preset = _preset(chat, instructions="Only quizzes.", tool_groups=[])
    chat_id = _chat_from(chat, preset)
    fake_model.script(Turn(text("Hello.")), Turn(text("Hello again.")))
    chat.wait(chat.send(chat_id, "hi"))
    narrow = _offered(fake_model.requests[-1])
    assert "Only quizzes." in _system(fake_model.requests[-1])
    assert not narrow & WRITING and {"ask_user", "select_offer"} <= narrow

    deleted = chat.client.delete(f"/api/presets/{preset}", headers=chat.auth.headers())
    assert deleted.status_code == 204
    chat.wait(chat.send(chat_id, "and now?"))
    wide = _offered(fake_model.requests[-1])
    assert wide >= WRITING and "list_offers" in wide and "web_search" in wide
    assert "Only quizzes." not in _system(fake_model.requests[-1])


def test_a_chat_from_a_preset_answers_with_its_model_and_a_preset_names_only_offered_ones(
    app, chat, fake_model
):
    refused = chat.post("/api/presets", {"name": "Deep", "model": "claude-opus-5"})
    assert refused.status_code == 400 and refused.get_json()["error"]["field"] == "model"
    runner = app.test_cli_runner()
    for name, label in (("claude-haiku-5-5", "Haiku"), ("claude-opus-5", "Opus")):
        assert runner.invoke(args=["models", "add", name, "--label", label]).exit_code == 0
    chat_id = _chat_from(chat, _preset(chat, model="claude-opus-5"))

    # Its first pick, which the person may change like any other.
    chats = chat.client.get("/api/chats", headers=chat.auth.headers()).get_json()["chats"]
    [listed] = [c for c in chats if c["id"] == chat_id]
    assert listed["model"] == "claude-opus-5"
    fake_model.script(Turn(text("Hi from Opus.")))
    assert chat.wait(chat.send(chat_id, "Hello"))["status"] == "completed"
    assert fake_model.requests[-1]["model"] == "claude-opus-5"
