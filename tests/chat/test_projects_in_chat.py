"""A chat in a project: the host is told which project (for a person in several), may
ask with the select_project card while the chat's project was never chosen, and from the
answer on reads that project's workspace."""

from __future__ import annotations

from app.accounts.projects import create_project
from app.chat.models import Conversation
from app.workspace.models import Offer
from tests.factories import user_id_of
from tests.fake_model import Turn, text, tool_use


def _offered(request: dict) -> set[str]:
    return {tool["name"] for tool in request.get("tools", [])}


def test_a_person_in_one_project_is_never_asked_and_told_nothing_new(app, chat, fake_model):
    fake_model.script(Turn(text("Hello.")))
    chat.wait(chat.send(chat.new_chat(), "hi"))
    request = fake_model.requests[-1]
    assert "select_project" not in _offered(request)
    assert "## Project" not in str(request["system"])


def test_asked_which_project_the_chat_works_in_it_from_then_on(app, chat, fake_model):
    ada = user_id_of(app)
    with app.extensions["database"].session() as session:
        team = create_project(session, ada, "Launch team")
        session.add(Offer(user_id=ada, project_id=team.id, name="Team Offer"))
        session.add(Offer(user_id=ada, name="Personal Offer"))
        team_id = team.id
        session.commit()
    fake_model.script(
        Turn(text("Which project?"), tool_use("select_project", {}, id="toolu_project")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Plan the launch"))
    assert "select_project" in _offered(fake_model.requests[-1])
    card = chat.rows(chat_id)[-1]["card"]
    options = {o["label"]: o["value"] for o in card["steps"][0]["options"]}
    assert options == {"Personal": options["Personal"], "Launch team": team_id}

    assert chat.answer(chat_id, "toolu_project", {"project_id": 999999}).status_code == 400
    fake_model.script(
        Turn(text("Looking."), tool_use("list_offers", {})),
        Turn(text("Done.")),
    )
    resumed = chat.answer(chat_id, "toolu_project", {"project_id": team_id})
    assert resumed.status_code == 202
    chat.wait(resumed.get_json()["runId"])
    with app.extensions["database"].session() as session:
        moved = session.get(Conversation, chat_id)
        assert (moved.project_id, moved.project_chosen) == (team_id, True)
    listed = fake_model.requests[-1]["messages"][-1]["content"][0]["content"]
    assert "Team Offer" in listed and "Personal Offer" not in listed
    last = fake_model.requests[-1]
    assert "select_project" not in _offered(last)  # chosen: never asked again
    assert 'the project "Launch team"; your role there is owner' in str(last["system"])
