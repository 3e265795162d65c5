"""Shared guidelines: seeded once from prompts/shared-guidelines.md, read from the database
for every agent run, each enabled rule exactly once in the agent's system prompt."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from app.agents.catalog import AgentDefinition
from app.agents.guidelines import (
    RuleInput,
    add_rule,
    current_rules,
    delete_rule,
    edit_rule,
    ensure_seeded,
    guidelines_from_file,
    ordered_guidelines,
    replace_rules,
    set_enabled,
)
from app.agents.models import Guideline, GuidelineChange
from app.agents.runner import agent_system_prompt
from app.workspace.models import Offer
from tests.factories import QUIZ, ChatDriver
from tests.fake_model import Turn, text, tool_use

FILE_RULES = [rule.text for rule in guidelines_from_file()]
EM_DASH_RULE = "Never use em dashes; use commas, colons or full stops instead."

AGENT = AgentDefinition(
    slug="tester",
    name="Tester",
    description="Writes test copy.",
    # States one shared rule itself (in different case and punctuation).
    prompt="You write test copy.\n\nNEVER use em dashes - use commas, colons or full stops instead!",
    output_schema={"type": "object"},
)


@pytest.fixture
def app(app_on_fake_model):
    """The app talks to the fake model server (for the end-to-end run)."""
    return app_on_fake_model


@pytest.fixture
def session(app):
    with app.extensions["database"].session() as session:
        yield session


def count(session, model, *where) -> int:
    return session.scalar(select(func.count()).select_from(model).where(*where))


def test_the_seed_file_has_rules():
    assert EM_DASH_RULE in FILE_RULES
    assert len(FILE_RULES) >= 4


def test_seeding_happens_once_and_is_recorded(session):
    assert ensure_seeded(session) is True
    session.commit()
    assert [g.text for g in ordered_guidelines(session)] == FILE_RULES
    assert [g.position for g in ordered_guidelines(session)] == list(range(1, len(FILE_RULES) + 1))
    assert count(session, GuidelineChange, GuidelineChange.action == "seeded") == len(FILE_RULES)
    changes = session.scalars(select(GuidelineChange).order_by(GuidelineChange.id)).all()
    assert all(c.user_id is None and c.before is None for c in changes)
    assert [c.after for c in changes] == FILE_RULES

    assert ensure_seeded(session) is False
    assert [r.text for r in current_rules(session)] == FILE_RULES
    session.commit()
    assert count(session, Guideline) == len(FILE_RULES)
    assert count(session, GuidelineChange) == len(FILE_RULES)


def test_the_first_read_seeds(session):
    assert [r.text for r in current_rules(session)] == FILE_RULES
    session.commit()
    assert count(session, Guideline) == len(FILE_RULES)


def test_an_emptied_list_stays_empty(session):
    ensure_seeded(session)
    for guideline in ordered_guidelines(session):
        delete_rule(session, guideline, None)
    session.commit()
    assert current_rules(session) == []
    assert ensure_seeded(session) is False
    assert count(session, Guideline) == 0
    assert agent_system_prompt(AGENT, session) == AGENT.prompt


def test_seed_demo_seeds_the_guidelines(app, session):
    for _ in range(2):  # the second time adds nothing
        result = app.test_cli_runner().invoke(args=["seed-demo"])
        assert result.exit_code == 0, result.output
        assert count(session, Guideline) == len(FILE_RULES)
        session.rollback()  # the read ends: a read left open holds off the next writer


def test_each_enabled_rule_appears_exactly_once(session):
    ensure_seeded(session)
    add_rule(session, "Keep sentences short.", None)
    add_rule(session, "keep sentences   short", None)  # the same rule, twice
    session.commit()

    prompt = agent_system_prompt(AGENT, session)
    assert prompt.startswith(AGENT.prompt)
    assert prompt.count("## Shared guidelines") == 1
    for rule in FILE_RULES:
        if rule == EM_DASH_RULE:
            # The agent's prompt states it already: not added again.
            assert rule not in prompt
        else:
            assert prompt.count(rule) == 1, rule
    assert prompt.lower().count("keep sentences") == 1
    assert prompt.lower().count("em dashes") == 1


def test_a_disabled_rule_is_absent(session):
    ensure_seeded(session)
    language = next(g for g in ordered_guidelines(session) if "language" in g.text)
    set_enabled(session, language, False, None)
    session.commit()
    prompt = agent_system_prompt(AGENT, session)
    assert language.text not in prompt
    assert all(r.text != language.text for r in current_rules(session))

    set_enabled(session, language, True, None)
    session.commit()
    assert agent_system_prompt(AGENT, session).count(language.text) == 1


def test_rules_follow_their_order(session):
    ensure_seeded(session)
    rules = ordered_guidelines(session)
    reordered = [RuleInput(g.id, g.text) for g in reversed(rules)]
    replace_rules(session, reordered, None)
    session.commit()
    prompt = agent_system_prompt(AGENT, session)
    places = [prompt.index(g.text) for g in reversed(rules) if g.text != EM_DASH_RULE]
    assert places == sorted(places)


def test_every_real_agent_gets_every_rule_once(app, session):
    ensure_seeded(session)
    session.commit()
    for agent in app.extensions["services"].agents:
        prompt = agent_system_prompt(agent, session)
        for rule in FILE_RULES:
            assert prompt.count(rule) <= 1
        assert prompt.lower().count("em dash") == 1, agent.slug


def _agent_systems(fake_model) -> list[str]:
    """The system prompts of the agent calls the model received, in order."""
    return [
        r["system"]
        for r in fake_model.requests
        if isinstance(r.get("system"), str) and "## Shared guidelines" in r["system"]
    ]


def _run_quiz(chat, fake_model, chat_id, offer_id):
    fake_model.script(
        Turn(
            text("Writing your quiz."),
            tool_use("quiz", {"instructions": "A morning quiz", "offer_id": offer_id}),
        ),
        Turn(text(json.dumps(QUIZ))),
        Turn(text("Your quiz is ready.")),
    )
    run = chat.wait(chat.send(chat_id, "Make a quiz"))
    assert run["status"] == "completed", run


def test_an_edit_applies_to_the_next_run_without_a_restart(app, auth, fake_model):
    """End to end: the loop runs the quiz agent; an admin edits a rule through the API;
    the very next agent call (same process, same app) carries the edited rule."""
    user_id = auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    chat = ChatDriver(app, auth.client, auth)
    with app.extensions["database"].session() as session:
        offer = Offer(user_id=user_id, name="Calm Mornings", description="Coaching")
        session.add(offer)
        session.commit()
        offer_id = offer.id
    chat_id = chat.new_chat()

    _run_quiz(chat, fake_model, chat_id, offer_id)
    first = _agent_systems(fake_model)
    assert len(first) == 1
    for rule in FILE_RULES:
        assert first[0].count(rule) == 1, rule

    rules = auth.client.get("/api/admin/guidelines").get_json()["rules"]
    edited = "Write in plain British English, whatever language the person writes in."
    language = next(r for r in rules if "language" in r["text"])
    body = [
        {"id": r["id"], "text": edited if r is language else r["text"], "enabled": r["enabled"]}
        for r in rules
    ]
    response = auth.client.put(
        "/api/admin/guidelines", json={"rules": body}, headers=auth.headers()
    )
    assert response.status_code == 200, response.get_json()

    _run_quiz(chat, fake_model, chat_id, offer_id)
    second = _agent_systems(fake_model)
    assert len(second) == 2
    assert second[1].count(edited) == 1
    assert language["text"] not in second[1]


def test_edit_rule_records_before_and_after(session):
    ensure_seeded(session)
    guideline = ordered_guidelines(session)[0]
    old = guideline.text
    assert edit_rule(session, guideline, "  A   new\nrule.  ", None) is True
    assert edit_rule(session, guideline, "A new rule.", None) is False
    session.commit()
    change = session.scalars(
        select(GuidelineChange).where(GuidelineChange.action == "edited")
    ).one()
    assert (change.before, change.after, change.guideline_id) == (old, "A new rule.", guideline.id)


def test_a_first_agent_run_seeds_and_keeps_the_rules(app, auth, fake_model):
    """An agent call with no offer on a database never seeded: the run's first read seeds
    the rules (committed, not rolled back with anything else) and the call carries them."""
    auth.create()
    auth.login()
    chat = ChatDriver(app, auth.client, auth)
    fake_model.script(
        Turn(text("Writing."), tool_use("quiz", {"instructions": "A morning quiz"})),
        Turn(text(json.dumps(QUIZ))),
        Turn(text("Done.")),
    )
    run = chat.wait(chat.send(chat.new_chat(), "Make a quiz"))
    assert run["status"] == "completed", run
    [system] = _agent_systems(fake_model)
    for rule in FILE_RULES:
        assert system.count(rule) == 1, rule
    with app.extensions["database"].session() as session:
        assert count(session, Guideline) == len(FILE_RULES)
        assert count(session, GuidelineChange, GuidelineChange.action == "seeded") == len(
            FILE_RULES
        )
