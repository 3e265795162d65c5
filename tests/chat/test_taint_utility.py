"""Utility: what the person asks for directly, in a conversation that has read nothing
untrusted, completes with no confirmation card (the gate costs nothing there)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.agents.catalog import load_agents
from app.agents.outputs import answer_tool_name
from app.chat.models import Conversation
from app.llm.demo import agent_output
from app.memory.store import read_memory
from app.workspace.models import Campaign, Character, Offer, Output, Persona, VisualAsset
from tests.chat.injection_kit import Site
from tests.fake_model import Turn, text, tool_use

AD_COPY = next(agent for agent in load_agents() if agent.slug == "ad-copy")


@pytest.fixture
def site():
    site = Site()
    yield site
    site.close()


@pytest.fixture
def app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, fetch_allow_hosts=("127.0.0.1",))


@pytest.fixture
def ids(app, chat):
    with app.extensions["database"].session() as session:
        offer = Offer(user_id=chat.user_id, name="Calm Mornings", description="Coaching")
        session.add(offer)
        session.flush()
        persona = Persona(user_id=chat.user_id, offer_id=offer.id, name="Busy Founder")
        character = Character(user_id=chat.user_id, name="Mira", description="A barista.")
        output = Output(
            user_id=chat.user_id, offer_id=offer.id, agent="ad-copy", title="Spring ad", content={}
        )
        session.add_all([persona, character, output])
        session.commit()
        return {
            "offer": offer.id,
            "persona": persona.id,
            "character": character.id,
            "output": output.id,
        }


def _ad():
    return agent_output(AD_COPY.slug, {"name": "Calm Mornings", "description": "Coaching"})


def _memory_ops(fact):
    return Turn(text(json.dumps({"operations": [{"op": "add", "fact": fact}]})))


def _saved(model, app, user_id):
    with app.extensions["database"].session() as session:
        return len(session.scalars(select(model).where(model.user_id == user_id)).all())


# (what the person types, the model's calls in order, what must have changed)
TASKS = {
    "write copy": (
        "Write ad copy for my offer",
        lambda ids, site: [
            Turn(
                tool_use(AD_COPY.tool_name, {"instructions": "Spring ad", "offer_id": ids["offer"]})
            ),
            Turn(tool_use(answer_tool_name(AD_COPY.name), _ad())),
        ],
        lambda app, user, site: _saved(Output, app, user) == 2,
    ),
    "save a character": (
        "Save a character named Ana, a baker",
        lambda ids, site: [
            Turn(tool_use("save_character", {"name": "Ana", "description": "A baker."}))
        ],
        lambda app, user, site: _saved(Character, app, user) == 2,
    ),
    "remember a preference": (
        "Remember that I like short headlines",
        lambda ids, site: [
            Turn(tool_use("remember", {"instruction": "I like short headlines"})),
            _memory_ops("Likes short headlines."),
        ],
        lambda app, user, site: _facts(app, user) == ["Likes short headlines."],
    ),
    "fetch a named page": (
        "Read {site}/pricing please",
        lambda ids, site: [Turn(tool_use("fetch_url", {"url": f"{site.url}/pricing"}))],
        lambda app, user, site: site.requests == ["/pricing"],
    ),
    "start a campaign": (
        "Start a draft campaign for my offer",
        lambda ids, site: [
            Turn(
                tool_use(
                    "start_campaign",
                    {"offer_id": ids["offer"], "name": "Spring", "briefing": {"goal": "leads"}},
                )
            )
        ],
        lambda app, user, site: _saved(Campaign, app, user) == 1,
    ),
    "make an image": (
        "Make an image of a sunrise",
        lambda ids, site: [Turn(tool_use("generate_image", {"prompt": "A sunrise over a cafe"}))],
        lambda app, user, site: _saved(VisualAsset, app, user) == 1,
    ),
    "link a character": (
        "Link Mira to my Busy Founder persona",
        lambda ids, site: [
            Turn(
                tool_use(
                    "link_character_persona",
                    {"character_id": ids["character"], "persona_id": ids["persona"]},
                )
            )
        ],
        lambda app, user, site: _linked(app, user),
    ),
    "draw a portrait": (
        "Make a portrait of Mira",
        lambda ids, site: [
            Turn(tool_use("generate_character_portrait", {"character_id": ids["character"]}))
        ],
        lambda app, user, site: _saved(VisualAsset, app, user) == 1,
    ),
    "switch to build": (
        "Let's build things now",
        lambda ids, site: [Turn(tool_use("set_phase", {"phase": "build"}))],
        lambda app, user, site: _phase(app, user) == "build",
    ),
    "reuse a saved output": (
        "Make a character from my spring ad",
        lambda ids, site: [
            Turn(tool_use("get_output", {"output_id": ids["output"]})),
            Turn(tool_use("save_character", {"name": "Ben", "description": "From the ad."})),
        ],
        lambda app, user, site: _saved(Character, app, user) == 2,
    ),
    "forget a preference": (
        "Forget that I like long emails",
        lambda ids, site: [
            Turn(tool_use("remember", {"instruction": "Forget that I like long emails"})),
            Turn(text(json.dumps({"operations": []}))),
        ],
        lambda app, user, site: _facts(app, user) == [],
    ),
}


def _facts(app, user_id):
    with app.extensions["database"].session() as session:
        return read_memory(session, user_id)[1]


def _phase(app, user_id):
    with app.extensions["database"].session() as session:
        return session.scalars(
            select(Conversation.tool_phase).where(Conversation.user_id == user_id)
        ).one()


def _linked(app, user_id):
    with app.extensions["database"].session() as session:
        return session.scalars(
            select(Character.persona_id).where(Character.user_id == user_id)
        ).one()


@pytest.mark.parametrize("task", sorted(TASKS))
def test_a_task_asked_for_directly_completes_with_no_card(app, chat, fake_model, site, ids, task):
    message, calls, changed = TASKS[task]
    fake_model.script(*calls(ids, site), Turn(text("Done.")))
    chat_id = chat.new_chat()

    run = chat.wait(chat.send(chat_id, message.format(site=site.url)))

    assert run["status"] == "completed", run
    assert all(row["kind"] != "card" for row in chat.rows(chat_id)), "no card was needed"
    assert changed(app, chat.user_id, site), f"{task}: the work was done"
    with app.extensions["database"].session() as session:
        for model in (Output, Character, VisualAsset, Campaign):
            assert all(
                obj.untrusted_sources is None
                for obj in session.scalars(select(model).where(model.user_id == chat.user_id))
            ), "nothing made in a clean chat is marked untrusted"
