"""Against a model that knows only what the request tells it (the fake's strict mode: a
forced tool call is answered with an instance of the tool's own schema, a request that only
describes JSON in prose gets prose and a guess), every shipped agent, every structured
build tool, memory reconcile and the onboarding starters complete on their first try."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator
from sqlalchemy import select

from app.accounts.onboarding import default_starters
from app.agents.catalog import load_agents
from app.agents.onboarding import write_starters
from app.agents.outputs import answer_tool_name
from app.memory.models import MemoryChange, UserMemory
from app.memory.store import FALLBACK_REASON
from app.workspace.models import Character, Output
from tests.factories import add_offer_and_persona, build_phase_chat, user_id_of
from tests.fake_model import Turn, text, tool_use

AGENTS = {agent.slug: agent for agent in load_agents()}


@pytest.fixture
def app(make_app, fake_model):
    fake_model.strict = True
    return make_app(anthropic_base_url=fake_model.base_url)


def _outputs(app) -> list[Output]:
    with app.extensions["database"].session() as session:
        return session.scalars(select(Output).order_by(Output.id)).all()


@pytest.mark.parametrize("slug", sorted(AGENTS))
def test_each_agent_completes_on_its_first_try(app, chat, fake_model, slug):
    agent = AGENTS[slug]
    ids = add_offer_and_persona(app, user_id_of(app))
    fake_model.script(
        Turn(tool_use(agent.tool_name, {"instructions": "Write it", "offer_id": ids["offer"]})),
        Turn(text("Here it is.")),
    )
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, f"Use {slug}"))["status"] == "completed"

    assert fake_model.strict_answers == [answer_tool_name(agent.name)], "one try"
    assert fake_model.rejections == []
    [output] = _outputs(app)
    assert output.agent == slug and output.offer_id == ids["offer"]
    assert list(Draft202012Validator(agent.output_schema).iter_errors(output.content)) == []
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert "is_error" not in result and str(output.id) in result["content"]


@pytest.mark.parametrize(
    ("tool", "slug"),
    [("generate_element_sheet", "element-sheet"), ("create_storyboard", "storyboard")],
)
def test_each_structured_build_tool_completes_on_its_first_try(app, chat, fake_model, tool, slug):
    ids = add_offer_and_persona(app, user_id_of(app))
    fake_model.script(
        Turn(tool_use(tool, {"offer_id": ids["offer"]})),
        Turn(text("Saved.")),
    )
    chat_id = build_phase_chat(app, chat)
    assert chat.wait(chat.send(chat_id, "Make it"))["status"] == "completed"

    assert len(fake_model.strict_answers) == 1, "one try"
    assert fake_model.rejections == []
    [output] = _outputs(app)
    assert output.agent == slug
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert "is_error" not in result


def test_a_cast_list_completes_on_its_first_try_and_saves_once_allowed(app, chat, fake_model):
    ids = add_offer_and_persona(app, user_id_of(app))
    fake_model.script(
        Turn(
            tool_use(
                "propose_cast_list",
                {"persona_id": ids["persona"], "offer_id": ids["offer"], "count": 2},
                id="toolu_cast",
            )
        ),
        Turn(text("Saved your cast.")),
    )
    chat_id = build_phase_chat(app, chat)
    assert chat.wait(chat.send(chat_id, "Cast two characters"))["status"] == "awaiting"
    assert fake_model.strict_answers == ["submit_cast_list"]
    card = next(r for r in chat.rows(chat_id) if r["kind"] == "card")["card"]
    assert len(card["arguments"]["characters"]) == 2

    answered = chat.answer(chat_id, "toolu_cast", {"approved": True})
    assert answered.status_code == 202, answered.get_json()
    assert chat.wait(answered.get_json()["runId"])["status"] == "completed"
    with app.extensions["database"].session() as session:
        saved = session.scalars(select(Character)).all()
    assert [c.persona_id for c in saved] == [ids["persona"], ids["persona"]]


def test_remember_reconciles_through_the_model_on_its_first_try(app, chat, fake_model):
    fake_model.script(
        Turn(tool_use("remember", {"instruction": "I prefer short headlines"})),
        Turn(text("Noted.")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Remember that I prefer short headlines"))

    assert fake_model.strict_answers == ["submit_memory_operations"]
    with app.extensions["database"].session() as session:
        memory = session.get(UserMemory, chat.user_id)
        reasons = session.scalars(select(MemoryChange.reason)).all()
    # The model's operations were applied, not the rules' fallback (which saves the
    # sentence as typed).
    assert memory.facts and reasons and FALLBACK_REASON not in reasons


def test_onboarding_starters_are_the_models_on_their_first_try(app, fake_model):
    starters = write_starters(app.extensions["services"], "Founder", "Acme Roasters", "")

    assert fake_model.strict_answers == ["submit_starters"]
    assert starters != default_starters()
    assert 3 <= len(starters) <= 4 and all(s["title"] and s["prompt"] for s in starters)
