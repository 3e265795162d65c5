"""Every shipped agent runs from a host tool call, streams to the timeline only, and saves a
schema-valid output; a malformed answer is retried once, then reported; cross-offer
references work and never reach another person's output."""

from __future__ import annotations

import json
import time

import pytest
from jsonschema import Draft202012Validator
from sqlalchemy import func, select

from app.agents.catalog import load_agents
from app.agents.outputs import answer_tool_name
from app.events import AgentToken, TextDelta
from app.llm.demo import agent_output
from app.workspace.models import Offer, Output
from tests.fake_model import Turn, text, tool_use

AGENTS = {agent.slug: agent for agent in load_agents()}


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


def _offer(app, user_id, name="Calm Mornings"):
    with app.extensions["database"].session() as session:
        offer = Offer(user_id=user_id, name=name, description="Coaching for founders")
        session.add(offer)
        session.commit()
        return offer.id


@pytest.mark.parametrize("slug", sorted(AGENTS))
def test_each_agent_runs_streams_and_saves_a_valid_output(app, chat, fake_model, slug):
    agent = AGENTS[slug]
    agent_tool = answer_tool_name(agent.name)
    offer_id = _offer(app, chat.user_id)
    output = agent_output(slug, {"name": "Calm Mornings", "description": "Coaching"})
    fake_model.script(
        Turn(tool_use(agent.tool_name, {"instructions": "Write it", "offer_id": offer_id})),
        Turn(tool_use(agent_tool, output), token_delay=0.001),
        Turn(text("Done.")),
    )
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id)

    assert chat.wait(chat.send(chat_id, f"Use {slug}"))["status"] == "completed"

    events = subscription.drain()
    tokens = "".join(e.text for e in events if isinstance(e, AgentToken))
    assert json.loads(tokens) == output, "the agent's tokens went to the timeline"
    assert all(output.get("title", "\0") not in e.text for e in events if isinstance(e, TextDelta))
    row = next(r for r in chat.rows(chat_id) if r["kind"] == "agent_output")
    assert row["agentOutput"]["agent"] == slug and row["content"] == ""
    with app.extensions["database"].session() as session:
        saved = session.get(Output, row["agentOutput"]["outputId"])
        assert saved.offer_id == offer_id
        assert list(Draft202012Validator(agent.output_schema).iter_errors(saved.content)) == []


GUESSED_VARIANT = {"hook": "Mornings back", "body": "Coaching for founders.", "cta": "Book"}


def test_every_schema_error_goes_back_at_once_and_one_retry_fixes_them(app, chat, fake_model):
    """A guess with three wrong fields in two variants: one retry, told all of it."""
    good = agent_output("ad-copy", {"name": "Calm Mornings"})
    fake_model.script(
        Turn(tool_use("ad_copy", {"instructions": "Ads"})),
        Turn(tool_use("submit_ad_copy", {"title": "Ads", "variants": [GUESSED_VARIANT] * 2})),
        Turn(tool_use("submit_ad_copy", good)),
        Turn(text("Here are your ads.")),
    )
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Ads please"))["status"] == "completed"

    first = fake_model.requests[1]
    assert first["tool_choice"] == {"type": "tool", "name": "submit_ad_copy"}
    assert first["tools"][0]["input_schema"] == AGENTS["ad-copy"].output_schema
    assert "thinking" not in first
    told = fake_model.requests[2]["messages"][-1]["content"][0]
    assert told["type"] == "tool_result" and told["is_error"] is True
    for where in ("variants/0", "variants/1"):
        for field in ("primary_text", "headline", "call_to_action"):
            assert f"at {where}: '{field}' is a required property" in told["content"]
    assert len(fake_model.requests) == 4, "one retry, then the host presented it"
    row = next(r for r in chat.rows(chat_id) if r["kind"] == "agent_output")
    assert row["agentOutput"]["content"] == good


def test_a_model_that_never_complies_ends_with_a_failure_the_host_explains(app, chat, fake_model):
    wrong = Turn(tool_use("submit_ad_copy", {"title": "Ads", "variants": "not a list"}))
    fake_model.script(
        Turn(tool_use("ad_copy", {"instructions": "Ads"})),
        wrong,
        wrong,
        Turn(text("Sorry, here it is: not json at all")),
        Turn(text("The ad copy writer could not produce valid variants; shall I try again?")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Ads please"))

    assert len(fake_model.requests) == 5, "the first answer and two retries, then the host"
    result = fake_model.requests[4]["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "did not produce a valid result" in result["content"]
    assert "not valid JSON" in result["content"], "the last problem is named"
    assert all(r["kind"] != "agent_output" for r in chat.rows(chat_id))
    assert chat.rows(chat_id)[-1]["content"].startswith("The ad copy writer could not")


def test_take_the_quiz_from_another_offer_and_adapt_it(app, chat, fake_model):
    source_offer = _offer(app, chat.user_id, "Trailhead Coffee")
    target_offer = _offer(app, chat.user_id, "Calm Mornings")
    quiz = agent_output("quiz", {"name": "Trailhead Coffee"})
    with app.extensions["database"].session() as session:
        reference = Output(
            user_id=chat.user_id,
            offer_id=source_offer,
            agent="quiz",
            title=quiz["title"],
            content=quiz,
        )
        session.add(reference)
        session.commit()
        reference_id = reference.id
    adapted = agent_output("quiz", {"name": "Calm Mornings"})
    fake_model.script(
        Turn(tool_use("list_offer_outputs", {"offer_id": source_offer})),
        Turn(tool_use("get_output", {"output_id": reference_id})),
        Turn(
            tool_use(
                "quiz",
                {
                    "instructions": "Adapt the coffee quiz for the coaching offer",
                    "offer_id": target_offer,
                    "reference_output_ids": [reference_id],
                },
            )
        ),
        Turn(tool_use("submit_quiz", adapted)),
        Turn(text("Adapted.")),
    )
    chat_id = chat.new_chat()
    assert (
        chat.wait(chat.send(chat_id, "Take the quiz from the coffee offer and adapt it"))["status"]
        == "completed"
    )

    listing = json.loads(fake_model.requests[1]["messages"][-1]["content"][0]["content"])
    assert f'"id": {reference_id}' in json.dumps(listing)
    fetched = fake_model.requests[2]["messages"][-1]["content"][0]["content"]
    assert quiz["title"] in fetched
    agent_context = fake_model.requests[3]["messages"][0]["content"]
    assert f"Reference output {reference_id}" in agent_context and quiz["title"] in agent_context
    assert "Calm Mornings" in agent_context


def test_referencing_someone_elses_output_is_not_found(app, chat, fake_model, auth):
    eve = auth.create("eve@example.com")
    with app.extensions["database"].session() as session:
        secret = Output(
            user_id=eve, agent="quiz", title="Eve's secret quiz", content={"title": "secret"}
        )
        session.add(secret)
        session.commit()
        secret_id = secret.id
    fake_model.script(
        Turn(
            tool_use("get_output", {"output_id": secret_id}),
            tool_use("quiz", {"instructions": "Adapt", "reference_output_ids": [secret_id]}),
        ),
        Turn(text("I could not find that output.")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Use Eve's quiz"))
    results = fake_model.requests[1]["messages"][-1]["content"]
    assert [r["is_error"] for r in results] == [True, True]
    assert all(
        "secret" not in r["content"] and f"No output with id {secret_id}" in r["content"]
        for r in results
    )
    assert len(fake_model.requests) == 2, "the agent never ran"


def test_stop_cuts_an_agent_while_it_writes(app, chat, fake_model):
    good = agent_output("ad-copy", {"name": "Calm Mornings"})
    fake_model.script(
        Turn(tool_use("ad_copy", {"instructions": "Ads"})),
        Turn(
            text("Drafting the variants now. " * 60),
            tool_use("submit_ad_copy", good),
            token_delay=0.05,
        ),
    )
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Ads please")
    fake_model.wait_for_requests(2)
    future = app.extensions["executor"].futures[run_id]
    started = time.monotonic()

    assert chat.post(f"/api/chats/{chat_id}/stop", {}).status_code == 200

    assert future.result(timeout=10) == "cancelled"
    assert time.monotonic() - started < 3, "cut at once, not written to its end (~18 s)"
    assert len(fake_model.replies) == 1, "only the host's turn was read to its end"
    with app.extensions["database"].session() as session:
        assert session.scalar(select(func.count(Output.id))) == 0


def test_two_outputs_of_one_offer_get_distinct_titles(app, chat, fake_model):
    """The same answer twice (a demo, or a model asked again) is numbered, not doubled."""
    offer_id = _offer(app, chat.user_id)
    output = agent_output("ad-copy", {"name": "Calm Mornings"})
    for _ in range(2):
        fake_model.script(
            Turn(tool_use("ad_copy", {"instructions": "Ads", "offer_id": offer_id})),
            Turn(tool_use("submit_ad_copy", output)),
            Turn(text("Here are your ads.")),
        )
        assert chat.wait(chat.send(chat.new_chat(), "Ads please"))["status"] == "completed"
    with app.extensions["database"].session() as session:
        titles = session.scalars(select(Output.title).order_by(Output.id)).all()
    assert titles == [output["title"], f"{output['title']} (2)"]
