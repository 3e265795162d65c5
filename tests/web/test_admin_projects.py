"""The admin area's projects: the People page lists each person's projects, every project
has a page with its members and usage, and an admin removes any project but a personal
one, with its chats and workspace, its members losing access at once."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import select

from app.accounts.project_models import Project, ProjectMember
from app.accounts.projects import create_project, personal_project_id
from app.billing.models import UsageEvent
from app.billing.quota import month_of
from app.chat.conversations import create_conversation
from app.chat.models import Conversation
from app.workspace.models import Attachment, Offer
from tests.factories import add_token, add_user
from tests.web.helpers import (
    alerts,
    assert_redirects_to_login,
    bearer,
    count,
    database,
    redirect_path,
    snapshot,
)


@pytest.fixture
def admin(auth):
    user_id = auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    return user_id


def _usage(session, user_id, key, credits, project_id, conversation_id=None):
    session.add(
        UsageEvent(
            idempotency_key=key,
            user_id=user_id,
            conversation_id=conversation_id,
            project_id=project_id,
            model="claude-sonnet-5-5",
            credits=credits,
            month=month_of(),
        )
    )


@pytest.fixture
def team(app):
    """Ada owns Launch (Bob its editor) and Other; each has a chat with an offer beside it,
    Launch's chat has an attachment and both have usage this month."""
    ada = add_user(app, "ada@example.com")
    bob = add_user(app, "bob@example.com")
    with database(app).session() as session:
        launch = create_project(session, ada, "Launch")
        other = create_project(session, ada, "Other")
        session.add(ProjectMember(project_id=launch.id, user_id=bob, role="editor"))
        launch_chat = create_conversation(session, bob, "Launch plan", project_id=launch.id)
        other_chat = create_conversation(session, ada, "Other plan", project_id=other.id)
        session.add_all(
            [
                Offer(user_id=ada, project_id=launch.id, name="Launch offer"),
                Offer(user_id=ada, project_id=other.id, name="Other offer"),
            ]
        )
        session.flush()
        session.add(
            Attachment(
                user_id=bob,
                conversation_id=launch_chat.id,
                filename="brief.txt",
                content_type="text/plain",
                size=5,
                data=b"brief",
            )
        )
        _usage(session, bob, "launch:chat:0", 7, launch.id, launch_chat.id)
        _usage(session, ada, "other:chat:0", 2, other.id, other_chat.id)
        session.commit()
        ids = {
            "ada": ada,
            "bob": bob,
            "launch": launch.id,
            "other": other.id,
            "launch_chat": launch_chat.id,
            "other_chat": other_chat.id,
            "bob_personal": personal_project_id(session, bob),
        }
    ids["bob_token"] = add_token(app, bob)[1]
    return ids


def _cells(page: str, row_id: str) -> list[str]:
    row = re.search(rf'<tr id="{row_id}">(.*?)</tr>', page, re.S)
    assert row, f"no row {row_id}"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", "", cell)).split()) for cell in cells]


def _pages(team) -> list[str]:
    return [
        "/admin/projects",
        f"/admin/projects/{team['launch']}",
        f"/admin/projects/{team['launch']}/delete",
    ]


def test_a_project_owner_who_is_not_an_admin_gets_403_and_removes_nothing(app, client, auth, team):
    auth.login("ada@example.com")  # Launch's owner, not an admin
    for path in _pages(team):
        assert client.get(path).status_code == 403, path
    before = snapshot(app)
    response = client.post(
        f"/admin/projects/{team['launch']}/delete",
        data={"name": "Launch", "csrf_token": auth.csrf},
    )
    assert response.status_code == 403
    assert snapshot(app) == before
    assert 'href="/admin/projects"' not in client.get("/settings").get_data(as_text=True)


def test_logged_out_the_project_pages_ask_to_log_in(app, team):
    for path in _pages(team):
        assert_redirects_to_login(app.test_client().get(path), path)


def test_admin_sees_every_project_with_owners_members_chats_and_credits(client, admin, team):
    page = client.get("/admin/projects").get_data(as_text=True)

    # Project, owners, members, chats, this month's credits.
    assert _cells(page, f"project-{team['launch']}") == ["Launch", "ada@example.com", "2", "1", "7"]
    assert _cells(page, f"project-{team['other']}") == ["Other", "ada@example.com", "1", "1", "2"]
    assert _cells(page, f"project-{team['bob_personal']}") == [
        "Personal (bob@example.com)",
        "bob@example.com",
        "1",
        "0",
        "0",
    ]
    shared_first = page.index(f'id="project-{team["launch"]}"') < page.index(
        f'id="project-{team["bob_personal"]}"'
    )
    assert shared_first
    assert 'href="/admin/projects" aria-current="page"' in page


def test_the_people_page_lists_each_persons_projects_and_role(client, admin, team):
    page = client.get("/admin/users").get_data(as_text=True)

    assert _cells(page, f"user-{team['bob']}")[2] == "Personal, Launch (editor)"
    assert _cells(page, f"user-{team['ada']}")[2] == "Personal, Launch (owner), Other (owner)"
    assert f'href="/admin/projects/{team["launch"]}"' in page


def test_a_projects_page_shows_its_members_roles_chats_and_usage(client, admin, team):
    page = client.get(f"/admin/projects/{team['launch']}").get_data(as_text=True)

    assert "<h1>Launch</h1>" in page
    assert _cells(page, f"member-{team['ada']}")[:2] == ["ada@example.com", "owner"]
    assert _cells(page, f"member-{team['bob']}")[:2] == ["bob@example.com", "editor"]
    assert _cells(page, f"month-{month_of()}") == [f"{month_of()} (this month)", "7", "1", "0"]
    assert _cells(page, f"chat-{team['launch_chat']}")[:2] == ["Launch plan", "bob@example.com"]
    assert "Other plan" not in page
    assert client.get("/admin/projects/999999").status_code == 404
    assert client.get("/admin/projects/999999/delete").status_code == 404


def test_admin_removes_a_project_with_its_chats_and_workspace_and_nothing_else(
    app, client, auth, admin, team
):
    launch, bob = team["launch"], bearer(team["bob_token"])
    assert client.get(f"/api/chats/{team['launch_chat']}/messages").status_code == 404  # not his
    assert app.test_client().get(f"/api/projects/{launch}", headers=bob).status_code == 200
    confirm = client.get(f"/admin/projects/{launch}/delete").get_data(as_text=True)
    assert "1 chat with their messages" in confirm and "Its 2 members lose access" in confirm

    response = client.post(
        f"/admin/projects/{launch}/delete", data={"name": "Launch", "csrf_token": auth.csrf}
    )

    assert redirect_path(response) == "/admin/projects"
    page = client.get("/admin/projects").get_data(as_text=True)
    assert "Removed the project Launch and its 1 chat." in page
    assert f'id="project-{launch}"' not in page
    assert count(app, Project, Project.id == launch) == 0
    assert count(app, Conversation, Conversation.id == team["launch_chat"]) == 0
    assert count(app, Attachment) == 0
    assert count(app, Offer, Offer.name == "Launch offer") == 0
    # The other project, its chat and workspace, and both people stay.
    assert count(app, Conversation, Conversation.id == team["other_chat"]) == 1
    assert count(app, Offer, Offer.name == "Other offer") == 1
    # Its member loses access at once: the project and its chat answer 404.
    member = app.test_client()
    assert member.get(f"/api/projects/{launch}", headers=bob).status_code == 404
    chat = member.get(f"/api/chats/{team['launch_chat']}/messages", headers=bob)
    assert chat.status_code == 404
    # Its usage stays, for its people, without a project.
    with database(app).session() as session:
        event = session.scalar(select(UsageEvent).where(UsageEvent.credits == 7))
        assert (event.user_id, event.project_id) == (team["bob"], None)
    usage = client.get("/admin/usage").get_data(as_text=True)
    assert _cells(usage, "project-usage-deleted") == ["Deleted projects", "7", "1", "0"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "launch"}, "That is not the project's name: nothing was removed."),
        ({"name": ""}, "This field is required."),
    ],
)
def test_a_wrong_name_removes_nothing(app, client, auth, admin, team, data, message):
    before = snapshot(app)
    response = client.post(
        f"/admin/projects/{team['launch']}/delete", data={**data, "csrf_token": auth.csrf}
    )
    assert response.status_code == 400
    assert message in alerts(response)
    assert snapshot(app) == before


def test_removing_without_the_csrf_token_removes_nothing(app, client, admin, team):
    before = snapshot(app)
    response = client.post(f"/admin/projects/{team['launch']}/delete", data={"name": "Launch"})
    assert response.status_code == 400
    assert snapshot(app) == before


def test_a_personal_project_goes_only_with_its_person(app, client, auth, admin, team):
    personal = team["bob_personal"]
    project_page = client.get(f"/admin/projects/{personal}").get_data(as_text=True)
    assert "Personal project of bob@example.com" in project_page
    assert "Remove this project" not in project_page
    before = snapshot(app)
    for response in (
        client.get(f"/admin/projects/{personal}/delete"),
        client.post(
            f"/admin/projects/{personal}/delete",
            data={"name": "Personal", "csrf_token": auth.csrf},
        ),
    ):
        assert redirect_path(response) == f"/admin/projects/{personal}"
    assert snapshot(app) == before
    page = client.get(f"/admin/projects/{personal}").get_data(as_text=True)
    assert "A personal project goes only with its person" in page


def test_admin_usage_shows_credits_per_project_this_month(client, admin, team):
    page = client.get("/admin/usage").get_data(as_text=True)

    # Project, credits, replies, billable tool calls: the heaviest first.
    assert _cells(page, f"project-usage-{team['launch']}") == ["Launch", "7", "1", "0"]
    assert _cells(page, f"project-usage-{team['other']}") == ["Other", "2", "1", "0"]
    assert page.index(f"project-usage-{team['launch']}") < page.index(
        f"project-usage-{team['other']}"
    )
    assert "project-usage-deleted" not in page
    earlier = client.get("/admin/usage?month=2020-01").get_data(as_text=True)
    assert "No project ran anything in 2020-01." in earlier
