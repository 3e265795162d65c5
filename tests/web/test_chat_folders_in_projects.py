"""Folders belong to a project (docs/CONTRACT.md, "The chat list"): the same name in two
projects is two folders, the sidebar names the project beside a folder for a person in
several, Move offers the chat's project's folders, and `GET /api/chats?project_id=`
lists one project's chats with its folders."""

from __future__ import annotations

import pytest

from app.accounts.projects import create_project, personal_project_id
from app.chat.conversations import create_conversation
from tests.factories import add_conversation, add_token, add_user
from tests.web.helpers import database, json_error
from tests.web.test_chat_organize import _groups

HTMX = {"HX-Request": "true"}


@pytest.fixture
def ada(app, user):
    """Ada (logged in) with her personal project and "Launch team": "Notes" filed in
    Drafts at home; "Brief" in Drafts and "Plan" in Clients in the team; "Loose" in no
    folder."""
    with database(app).session() as session:
        personal = personal_project_id(session, user)
        team = create_project(session, user, "Launch team").id
        chats = {}
        for title, project, folder in (
            ("Notes", personal, "Drafts"),
            ("Brief", team, "Drafts"),
            ("Plan", team, "Clients"),
            ("Loose", team, None),
        ):
            chat = create_conversation(session, user, title, project)
            chat.folder = folder
            chats[title] = chat.id
        session.commit()
    _, raw = add_token(app, user)
    return {
        "personal": personal,
        "team": team,
        "chats": chats,
        "api": {"Authorization": f"Bearer {raw}"},
    }


def test_the_sidebar_shows_each_projects_folders_apart(client, ada):
    html = client.get(f"/chats/{ada['chats']['Loose']}").get_data(as_text=True)
    sidebar = html[html.index('id="conversation-list"') : html.index("</aside>")]
    assert _groups(sidebar) == [
        "Clients",
        "Plan",
        "Drafts",
        "Brief",
        "Drafts",
        "Notes",
        "Recent",
        "Loose",
    ]
    assert sidebar.count('<span class="folder-project muted">in Launch team</span>') == 2
    assert sidebar.count('<span class="folder-project muted">in Personal</span>') == 1
    assert 'aria-label="Folder Drafts in Personal"' in sidebar
    assert f'data-group="folder:{ada["team"]}:Drafts"' in sidebar


def test_move_offers_only_the_chats_projects_folders(client, auth, ada):
    form = client.get(f"/chats/{ada['chats']['Notes']}/folder", headers=HTMX).get_data(as_text=True)
    assert "to a folder in Personal</legend>" in form
    assert 'value="Drafts"' in form and 'value="Clients"' not in form
    team_form = client.get(f"/chats/{ada['chats']['Loose']}/folder", headers=HTMX).get_data(
        as_text=True
    )
    assert 'value="Drafts"' in team_form and 'value="Clients"' in team_form
    # Filing the team's loose chat under Drafts joins the team's Drafts, not her own.
    html = client.post(
        f"/chats/{ada['chats']['Loose']}/organize",
        data={"folder": "Drafts"},
        headers={**HTMX, **auth.headers()},
    ).get_data(as_text=True)
    assert _groups(html) == [
        *("Clients", "Plan"),
        *("Drafts", "Loose", "Brief"),
        *("Drafts", "Notes"),
        "Recent",
    ]


def test_the_api_lists_one_projects_chats_and_folders(client, ada):
    def listing(query):
        response = client.get(f"/api/chats{query}", headers=ada["api"])
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()

    team = listing(f"?project_id={ada['team']}")
    assert [c["title"] for c in team["chats"]] == ["Loose", "Plan", "Brief"]
    assert team["folders"] == ["Clients", "Drafts"]
    assert {c["project_id"] for c in team["chats"]} == {ada["team"]}
    filed = listing(f"?project_id={ada['team']}&folder=Drafts")
    assert [c["title"] for c in filed["chats"]] == ["Brief"]
    home = listing(f"?project_id={ada['personal']}")
    assert ([c["title"] for c in home["chats"]], home["folders"]) == (["Notes"], ["Drafts"])
    everything = listing("?folder=Drafts")
    assert [c["title"] for c in everything["chats"]] == ["Brief", "Notes"]
    assert "folders" not in everything


def test_a_project_not_yours_is_404_and_a_malformed_id_400(app, client, ada):
    bob = add_user(app, "bob@example.com")
    add_conversation(app, bob, "Bob's chat")
    with database(app).session() as session:
        bobs = create_project(session, bob, "Bob's team").id
        session.commit()
    for project_id in (bobs, 2_147_483_647, 99_999_999_999 // 10):
        answer = client.get(f"/api/chats?project_id={project_id}", headers=ada["api"])
        assert json_error(answer, 404) == "NOT_FOUND"
    for bad in ("abc", "-1", "1.5", "12345678901"):
        answer = client.get(f"/api/chats?project_id={bad}", headers=ada["api"])
        assert json_error(answer, 400) == "INVALID_FIELD"


def test_a_person_with_one_project_sees_no_project_names(client, auth, user):
    chat = add_conversation(client.application, user, "Acme brief")
    client.post(
        f"/chats/{chat}/organize", data={"folder": "Acme"}, headers={**HTMX, **auth.headers()}
    )
    html = client.get(f"/chats/{chat}").get_data(as_text=True)
    assert '<span class="folder-name">Acme</span> <span class="muted">(1)</span>' in html
    assert "folder-project" not in html
    form = client.get(f"/chats/{chat}/folder", headers=HTMX).get_data(as_text=True)
    assert "<legend>Move “Acme brief” to</legend>" in form


def test_the_sockets_list_item_names_the_same_group_as_the_list(app, client, ada):
    """A filed chat's item pushed by the socket (a new title, say) stays in its group: the
    page fetches the list again only when the groups differ (static/app.js)."""
    from app.chat.conversations import conversation_dict
    from app.chat.models import Conversation
    from app.stream.live import LiveState
    from app.web.frames import HtmlFrames

    chat = ada["chats"]["Brief"]
    page = client.get(f"/chats/{chat}").get_data(as_text=True)
    group = f'data-group="folder:{ada["team"]}:Drafts"'
    assert f'<ul class="conversation-list" {group}' in page
    with database(app).session() as session:
        item = conversation_dict(session.get(Conversation, chat))
    with app.test_request_context(f"/chats/{chat}"):
        pushed = HtmlFrames(chat, LiveState()).title(item)
    assert f'id="conv-{chat}"' in pushed and group in pushed
