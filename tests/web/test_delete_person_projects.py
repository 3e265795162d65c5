"""Deleting a person who shares projects (app/accounts/person_projects.py): a project
they alone own passes to another member (an editor before a viewer, the longest-standing
first), one they alone belong to goes with them, and what they made in a project that
stays, stays with it. The confirmation page says so beforehand."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.accounts.project_models import Project, ProjectInvitation, ProjectMember
from app.accounts.projects import add_member, create_project
from app.chat.models import Conversation
from app.db import utcnow
from app.workspace.models import Campaign, Character, Offer, Output, Persona, VisualAsset
from tests.factories import add_token, add_user
from tests.web.helpers import bearer, count, database, redirect_path

WORKSPACE = (Offer, Persona, Output, VisualAsset, Character, Campaign)


def _world(app) -> dict:
    """Bob's projects: "Launch team" (Vic viewer since last week, Ada editor since
    today), "Viewers only" (Vic viewer), "Co-owned" (Ada an owner too) and "Solo" (only
    him). In Launch team Bob made one of everything, from a chat of his, and invited an
    address that has not answered yet."""
    ids = {name: add_user(app, f"{name}@example.com") for name in ("bob", "ada", "vic")}
    bob, vic = ids["bob"], ids["vic"]
    with database(app).session() as session:
        team = create_project(session, bob, "Launch team")
        session.add(
            ProjectMember(
                project_id=team.id,
                user_id=vic,
                role="viewer",
                created_at=utcnow() - timedelta(days=7),
            )
        )
        add_member(session, team.id, bob, "ada@example.com", "editor")
        add_member(session, team.id, bob, "newcomer@example.com", "editor")
        viewers = create_project(session, bob, "Viewers only")
        add_member(session, viewers.id, bob, "vic@example.com", "viewer")
        co_owned = create_project(session, bob, "Co-owned")
        add_member(session, co_owned.id, bob, "ada@example.com", "owner")
        solo = create_project(session, bob, "Solo")
        scoped = {"user_id": bob, "project_id": team.id}
        chat = Conversation(title="Bob's team chat", **scoped)
        session.add_all([chat, Offer(name="Solo offer", user_id=bob, project_id=solo.id)])
        session.flush()
        session.add_all(
            [
                Offer(name="Calm Mornings", **scoped),
                Persona(name="Busy parent", **scoped),
                Output(agent="quiz", title="Quiz", content={}, conversation_id=chat.id, **scoped),
                VisualAsset(title="Hero image", **scoped),
                Character(name="Mia", **scoped),
                Campaign(name="Spring", **scoped),
            ]
        )
        session.commit()
        projects = {
            "team": team.id,
            "viewers": viewers.id,
            "co_owned": co_owned.id,
            "solo": solo.id,
        }
    return {**ids, **projects, "chat": chat.id}


def _role(app, project_id: int, user_id: int) -> str | None:
    with database(app).session() as session:
        return session.scalar(
            select(ProjectMember.role).where(
                ProjectMember.project_id == project_id, ProjectMember.user_id == user_id
            )
        )


def test_deleting_bob_hands_his_projects_over_and_keeps_the_teams_work(app, client, auth):
    world = _world(app)
    auth.create("root@example.com", admin=True)
    auth.login("root@example.com")

    confirm = client.get(f"/admin/users/{world['bob']}/delete").get_data(as_text=True)
    assert "<li>Launch team passes to ada@example.com</li>" in confirm
    assert "<li>Viewers only passes to vic@example.com</li>" in confirm
    assert "<li>Solo</li>" in confirm
    assert "Co-owned" not in confirm  # Ada owns it too: nothing changes for it

    response = client.post(
        f"/admin/users/{world['bob']}/delete",
        data={"email": "bob@example.com", "csrf_token": auth.csrf},
    )
    assert redirect_path(response) == "/admin/users"
    flashed = client.get("/admin/users").get_data(as_text=True)
    assert "Launch team now belongs to ada@example.com." in flashed

    # The editor, though she joined after the viewer, is Launch team's owner now.
    assert _role(app, world["team"], world["ada"]) == "owner"
    assert _role(app, world["team"], world["vic"]) == "viewer"
    assert _role(app, world["viewers"], world["vic"]) == "owner"
    assert _role(app, world["co_owned"], world["ada"]) == "owner"
    assert count(app, Project, Project.id == world["solo"]) == 0
    assert count(app, Offer, Offer.name == "Solo offer") == 0
    # Everything Bob made in Launch team stays with it, its maker unnamed; his chat goes.
    for model in WORKSPACE:
        assert count(app, model, model.project_id == world["team"], model.user_id.is_(None)) == 1
    assert count(app, Conversation, Conversation.id == world["chat"]) == 0
    assert count(app, Output, Output.conversation_id.is_(None)) == 1
    # The invitation he sent and nobody accepted is withdrawn.
    assert count(app, ProjectInvitation) == 0

    # Ada sees the team's work over the API and may now manage the project.
    _, raw = add_token(app, world["ada"])
    ada = bearer(raw)
    shown = client.get(f"/api/projects/{world['team']}", headers=ada).get_json()
    assert shown["role"] == "owner"
    offers = client.get(f"/api/offers?project_id={world['team']}", headers=ada).get_json()
    assert [o["name"] for o in offers["items"]] == ["Calm Mornings"]
    assets = client.get(f"/api/assets?project_id={world['team']}", headers=ada).get_json()
    assert [a["title"] for a in assets["items"]] == ["Hero image"]
    renamed = client.patch(f"/api/projects/{world['team']}", json={"name": "Ours"}, headers=ada)
    assert renamed.status_code == 200


def test_a_person_only_in_their_own_projects_is_deleted_as_before(app, client, auth):
    bob = add_user(app, "bob@example.com")
    auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    confirm = client.get(f"/admin/users/{bob}/delete").get_data(as_text=True)
    assert "projects-passed" not in confirm and "projects-deleted" not in confirm
    client.post(
        f"/admin/users/{bob}/delete", data={"email": "bob@example.com", "csrf_token": auth.csrf}
    )
    assert count(app, Project, Project.personal_user_id == bob) == 0
