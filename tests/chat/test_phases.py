"""Two phases: discovery offers read, UI and agent tools; build adds the write actions.
Every build-only tool is reachable: set_phase is always offered and the prompt says how."""

from __future__ import annotations

import json

from app.chat.models import Conversation
from app.chat.toolset import capability_notes, tools_for_step
from tests.fake_model import Turn, text, tool_use


def _phase(app, chat_id):
    with app.extensions["database"].session() as session:
        return session.get(Conversation, chat_id).tool_phase


def test_build_tools_are_hidden_in_discovery_and_set_phase_reveals_them(app, chat, fake_model):
    fake_model.script(
        Turn(tool_use("set_phase", {"phase": "build"})),
        Turn(text("Build tools ready.")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Save a character for me"))
    first, second = fake_model.requests
    first_tools = {t["name"] for t in first["tools"]}
    second_tools = {t["name"] for t in second["tools"]}
    assert "save_character" not in first_tools and "set_phase" in first_tools
    assert "save_character" in second_tools and "generate_image" in second_tools
    assert _phase(app, chat_id) == "build"


def test_a_build_tool_called_in_discovery_widens_to_build(app, chat, fake_model):
    fake_model.script(
        Turn(tool_use("save_character", {"name": "Mira", "description": "A barista."})),
        Turn(text("Saved.")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Save Mira"))
    result = fake_model.requests[1]["messages"][-1]["content"][0]
    assert not result.get("is_error"), result
    assert json.loads(result["content"])["name"] == "Mira"
    assert _phase(app, chat_id) == "build"


def test_every_build_only_tool_is_reachable_from_discovery(app):
    registry = app.extensions["services"].tools
    build_only = [t for t in registry.all() if t.phase == "build"]
    assert build_only, "the write actions are build-only"
    discovery = tools_for_step(registry, "discovery")
    names = {t.name for t in discovery}
    assert "set_phase" in names
    notes = capability_notes(discovery)
    # The prompt names the way to switch and what it unlocks.
    assert "set_phase" in notes and "build" in notes
    build = {t.name for t in tools_for_step(registry, "build")}
    assert {t.name for t in build_only} <= build


def test_remember_goes_through_the_memory_reconcile(app, chat, fake_model):
    fake_model.script(
        Turn(tool_use("remember", {"instruction": "I prefer short headlines"})),
        Turn(text(json.dumps({"operations": [{"op": "add", "fact": "Prefers short headlines."}]}))),
        Turn(text("I'll remember that.")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Remember that I prefer short headlines"))
    assert chat.client.get("/api/memory").get_json()["memories"] == ["Prefers short headlines."]
