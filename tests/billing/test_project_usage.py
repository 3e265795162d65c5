"""Usage per project: each run's usage event names its chat's project, so a project's
credits are read apart from another's, and stay after the chat is deleted."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.accounts.models import User
from app.accounts.project_models import ProjectMember
from app.accounts.projects import add_member
from app.billing.quota import credits_used, month_of
from app.billing.usage import Usage, project_history, project_totals, usage_by_project
from app.chat.person_deletion import delete_person
from app.config import DEFAULT_HOST_MODEL
from tests.billing import metered, usage_events
from tests.factories import add_user

HOST_WEIGHT = 3


@pytest.fixture
def app(make_app, fake_model):
    return make_app(
        anthropic_base_url=fake_model.base_url,
        host_model=DEFAULT_HOST_MODEL,
        model_credit_weights={DEFAULT_HOST_MODEL: HOST_WEIGHT},
    )


def _project(chat, name: str) -> int:
    response = chat.post("/api/projects", {"name": name})
    assert response.status_code == 201
    return response.get_json()["id"]


def _chat_in(chat, project_id: int) -> int:
    response = chat.post("/api/chats", {"project_id": project_id})
    assert response.status_code == 201
    return response.get_json()["id"]


def _reply(chat, fake_model, chat_id: int) -> None:
    fake_model.script("Done.")
    assert chat.wait(chat.send(chat_id, "Plan the launch"))["status"] == "completed"


def test_runs_in_two_projects_are_counted_apart(app, chat, fake_model):
    launch, other = _project(chat, "Launch"), _project(chat, "Other")
    for project_id in (launch, launch, other):
        _reply(chat, fake_model, _chat_in(chat, project_id))

    events = metered(app, chat.user_id, 3)

    assert [event.project_id for event in events] == [launch, launch, other]
    with app.extensions["database"].session() as session:
        totals = project_totals(session, month_of())
        assert totals == {launch: Usage(2 * HOST_WEIGHT, 2, 0), other: Usage(HOST_WEIGHT, 1, 0)}
        lines = usage_by_project(session, month_of())
        assert [(line.name, line.usage.credits) for line in lines] == [
            ("Launch", 2 * HOST_WEIGHT),
            ("Other", HOST_WEIGHT),
        ]
        assert credits_used(session, chat.user_id, month_of()) == 3 * HOST_WEIGHT


def test_deleting_a_chat_keeps_its_projects_usage(app, chat, fake_model):
    launch = _project(chat, "Launch")
    chat_id = _chat_in(chat, launch)
    _reply(chat, fake_model, chat_id)
    metered(app, chat.user_id, 1)

    deleted = chat.post("/api/chats/bulk", {"ids": [chat_id], "action": "delete"})

    assert deleted.status_code == 200, deleted.get_json()
    [event] = metered(app, chat.user_id, 1)
    assert (event.conversation_id, event.project_id) == (None, launch)
    with app.extensions["database"].session() as session:
        assert project_history(session, launch) == [(month_of(), Usage(HOST_WEIGHT, 1, 0))]


def test_a_chat_in_the_personal_project_counts_for_it(app, chat, fake_model):
    _reply(chat, fake_model, chat.new_chat())
    [event] = metered(app, chat.user_id, 1)
    with app.extensions["database"].session() as session:
        [line] = usage_by_project(session, month_of())
    assert (line.project_id, line.name, line.personal_email) == (
        event.project_id,
        "Personal",
        "ada@example.com",
    )


def test_a_deleted_members_runs_stay_in_the_projects_usage(app, chat, fake_model):
    """The project's credits are the team's record: deleting the person who ran them
    leaves them counted, naming no one."""
    launch = _project(chat, "Launch")
    with app.extensions["database"].session() as session:
        bob = add_user(app, "bob@example.com")
        add_member(session, launch, chat.user_id, "bob@example.com", "editor")
        session.commit()
    _reply(chat, fake_model, _chat_in(chat, launch))
    metered(app, chat.user_id, 1)

    with app.extensions["database"].session() as session:
        delete_person(session, session.get_one(User, chat.user_id))
        session.commit()

    [event] = usage_events(app)
    assert (event.user_id, event.conversation_id, event.project_id) == (None, None, launch)
    with app.extensions["database"].session() as session:
        assert project_totals(session, month_of()) == {launch: Usage(HOST_WEIGHT, 1, 0)}
        [line] = usage_by_project(session, month_of())
        assert (line.name, line.usage.credits) == ("Launch", HOST_WEIGHT)
        [member] = session.scalars(select(ProjectMember).where(ProjectMember.project_id == launch))
        assert (member.user_id, member.role) == (bob, "owner")
