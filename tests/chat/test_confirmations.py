"""Held calls: a tool that needs the person's approval pauses on a confirmation card; the
approved call runs once with the card's exact arguments; declining tells the model."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from app.tools.registry import ACTION, ToolInput, tool
from app.tools.results import ToolResult, confirmation
from app.workspace.models import Character
from tests.fake_model import Turn, text, tool_use


def _save(ctx, args):
    character = Character(user_id=ctx.user_id, name=args["name"])
    ctx.session.add(character)
    ctx.session.flush()
    return ToolResult({"character_id": character.id, "name": character.name})


class HeroInput(ToolInput):
    name: str


@pytest.fixture
def held_tool(app):
    declared = tool(
        name="save_hero",
        description="Save a hero (asks first).",
        category=ACTION,
        input=HeroInput,
        phase="discovery",
        handler=lambda ctx, args: confirmation(
            args.model_dump(), "Saving changes your workspace.", f"Save {args.name}?"
        ),
        on_approved=_save,
    )
    app.extensions["services"].tools.add(declared)
    return declared


def _characters(app):
    with app.extensions["database"].session() as session:
        return session.scalars(select(Character.name)).all()


def _paused(chat, fake_model):
    fake_model.script(
        Turn(text("I'll save her."), tool_use("save_hero", {"name": "Mira"}, id="toolu_hold"))
    )
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "Save Mira"))
    return chat_id, run


def test_the_call_waits_for_approval_then_runs_once_with_the_card_arguments(
    app, chat, fake_model, held_tool
):
    chat_id, run = _paused(chat, fake_model)
    assert run["status"] == "awaiting"
    card = chat.rows(chat_id)[-1]["card"]
    assert card["kind"] == "confirmation" and card["tool"] == "save_hero"
    assert card["arguments"] == {"name": "Mira"} and card["reason"]
    assert _characters(app) == []

    fake_model.script("Saved Mira.")
    response = chat.answer(chat_id, "toolu_hold", {"approved": True})
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"

    assert _characters(app) == ["Mira"]
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["tool_use_id"] == "toolu_hold"
    assert json.loads(result["content"])["name"] == "Mira"
    # The approval is spent: replaying it asks nothing and runs nothing.
    assert chat.answer(chat_id, "toolu_hold", {"approved": True}).status_code == 409
    assert _characters(app) == ["Mira"]
    assert fake_model.rejections == []


def test_declining_tells_the_model_and_runs_nothing(app, chat, fake_model, held_tool):
    chat_id, _ = _paused(chat, fake_model)
    fake_model.script("Understood, I won't save her.")
    response = chat.answer(chat_id, "toolu_hold", {"approved": False})
    chat.wait(response.get_json()["runId"])
    assert _characters(app) == []
    result = json.loads(fake_model.requests[-1]["messages"][-1]["content"][0]["content"])
    assert result["approved"] is False and "declined" in result["message"]


@pytest.mark.parametrize("answer", [{}, {"approved": "yes"}, {"approved": 1}, {"offer_id": 3}])
def test_a_confirmation_only_takes_approved_true_or_false(app, chat, fake_model, held_tool, answer):
    chat_id, _ = _paused(chat, fake_model)
    response = chat.answer(chat_id, "toolu_hold", answer)
    assert response.status_code == 400
    assert chat.rows(chat_id)[-1]["card"]["status"] == "awaiting"
    with app.extensions["database"].session() as session:
        assert session.scalar(select(func.count()).select_from(Character)) == 0


class FlakyModelSave:
    """An approved handler that fails the way a build tool does when the model is down."""

    def __init__(self):
        self.calls = 0

    def __call__(self, ctx, args):
        from app.llm.errors import ModelError

        self.calls += 1
        _save(ctx, args)  # written, then rolled back with the failure
        raise ModelError("overloaded_error", "Overloaded", status=529)


def test_an_approved_call_that_fails_is_spent_and_never_run_again(app, chat, fake_model, held_tool):
    flaky = FlakyModelSave()
    object.__setattr__(held_tool, "on_approved", flaky)
    chat_id, _ = _paused(chat, fake_model)
    fake_model.script("The save failed because the model is busy.")
    response = chat.answer(chat_id, "toolu_hold", {"approved": True})
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["tool_use_id"] == "toolu_hold" and result["is_error"] is True
    assert "busy" in result["content"]
    assert _characters(app) == [], "the failed call wrote nothing"

    fake_model.script("Hello again.")
    chat.wait(chat.send(chat_id, "thanks, something else now"))

    assert flaky.calls == 1, "the next, unrelated message did not run it again"
    assert chat.rows(chat_id)[-1]["content"] == "Hello again."
    assert fake_model.rejections == []


def test_an_approved_card_whose_tool_is_gone_becomes_an_error_result(
    app, chat, fake_model, held_tool
):
    chat_id, _ = _paused(chat, fake_model)
    app.extensions["services"].tools._tools.pop("save_hero")  # a deploy removed it
    fake_model.script("That action is no longer available.")
    response = chat.answer(chat_id, "toolu_hold", {"approved": True})
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "no longer available" in result["content"]

    fake_model.script("Hi.")
    assert chat.wait(chat.send(chat_id, "ok"))["status"] == "completed", "no exception later"


def test_a_typed_message_closes_an_approved_card_that_never_ran(app, chat, fake_model, held_tool):
    from app.chat.models import Message

    chat_id, _ = _paused(chat, fake_model)
    # Approved, but its run ended before carrying it out (stopped or crashed first).
    with app.extensions["database"].session() as session:
        row = session.scalars(select(Message).where(Message.kind == "card")).one()
        card = {**row.meta["card"], "status": "answered", "executed": False}
        row.meta = {**row.meta, "card": card, "awaiting": None}
        session.commit()

    fake_model.script("Sure, what next?")
    chat.wait(chat.send(chat_id, "never mind, something else"))

    assert _characters(app) == [], "the new message did not carry out the old approval"
    history = fake_model.requests[-1]["messages"]
    result = next(
        b
        for m in history
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and b["tool_use_id"] == "toolu_hold"
    )
    assert "not carried out" in result["content"]
    assert fake_model.rejections == []
