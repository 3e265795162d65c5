"""Pins, folders and the archive (docs/CONTRACT.md): `PATCH /api/chats/<id>`, the list's
filters, `POST /api/chats/bulk`, and the sidebar and Archived page that show them."""

from __future__ import annotations

import pytest

from app.chat.models import Conversation, ConversationStatus, Run
from app.chat.rows import insert_message
from tests.factories import add_conversation, add_token
from tests.web.helpers import count, database, fetch, json_error, redirect_path, snapshot

HTMX = {"HX-Request": "true"}


@pytest.fixture
def api(app, user):
    """Ada's script: her bearer token, no cookies."""
    _, raw = add_token(app, user)
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {raw}"
    return client


def listed(api, query: str = "") -> list[dict]:
    response = api.get(f"/api/chats{query}")
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["chats"]


def titles(api, query: str = "") -> list[str]:
    return [chat["title"] for chat in listed(api, query)]


# PATCH /api/chats/<id>


def test_pin_file_and_rename_a_chat_in_one_request(app, api, user):
    chat = add_conversation(app, user, "Spring launch")
    response = api.patch(
        f"/api/chats/{chat}",
        json={"pinned": True, "folder": "  Clients  ", "title": "Spring launch v2"},
    )
    assert response.status_code == 200
    body = response.get_json()
    assert body["id"] == chat
    assert (body["title"], body["pinned"], body["archived"], body["folder"]) == (
        "Spring launch v2",
        True,
        False,
        "Clients",
    )
    stored = fetch(app, Conversation, chat)
    assert stored.pinned_at is not None and stored.folder == "Clients"
    assert stored.title_source == "person"
    # A field left out keeps its value; an empty name or null takes it out of its folder.
    assert api.patch(f"/api/chats/{chat}", json={"pinned": False}).get_json()["folder"] == (
        "Clients"
    )
    assert api.patch(f"/api/chats/{chat}", json={"folder": "   "}).get_json()["folder"] is None
    api.patch(f"/api/chats/{chat}", json={"folder": "Clients"})
    assert api.patch(f"/api/chats/{chat}", json={"folder": None}).get_json()["folder"] is None
    assert fetch(app, Conversation, chat).pinned_at is None


def test_organizing_does_not_move_a_chat_in_recent_order(app, api, user):
    older = add_conversation(app, user, "Older")
    add_conversation(app, user, "Newer")
    before = fetch(app, Conversation, older).updated_at
    api.patch(f"/api/chats/{older}", json={"pinned": True, "folder": "Later"})
    assert fetch(app, Conversation, older).updated_at == before
    assert titles(api) == ["Newer", "Older"]


def test_archived_chats_leave_the_list_and_come_back_when_restored(app, api, user):
    kept = add_conversation(app, user, "Kept")
    gone = add_conversation(app, user, "Put away")
    assert api.patch(f"/api/chats/{gone}", json={"archived": True}).get_json()["archived"]
    assert titles(api) == ["Kept"]
    assert titles(api, "?archived=false") == ["Kept"]
    assert titles(api, "?archived=true") == ["Put away"]
    # Still the person's: open, searchable.
    assert api.get(f"/api/chats/{gone}/messages").status_code == 200
    api.patch(f"/api/chats/{gone}", json={"archived": False})
    assert sorted(titles(api)) == ["Kept", "Put away"]
    assert fetch(app, Conversation, kept).archived_at is None


def test_the_list_filters_by_folder(app, api, user):
    first = add_conversation(app, user, "Acme brief")
    add_conversation(app, user, "Loose")
    second = add_conversation(app, user, "Acme follow-up")
    for chat in (first, second):
        api.patch(f"/api/chats/{chat}", json={"folder": "Acme"})
    assert titles(api, "?folder=Acme") == ["Acme follow-up", "Acme brief"]
    assert titles(api, "?folder=") == ["Loose"]
    assert titles(api, "?folder=Nobody") == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"folder": "x" * 61}, "folder"),
        ({"folder": "Tabs\there"}, "folder"),
        ({"folder": "Line\nbreak"}, "folder"),
        ({"folder": 5}, "folder"),
        ({"pinned": "true"}, "pinned"),
        ({"pinned": 1}, "pinned"),
        ({"pinned": None}, "pinned"),
        ({"archived": "yes"}, "archived"),
        ({"title": "   "}, "title"),
        ({"title": None}, "title"),
        ({"title": "x" * 121}, "title"),
        ({"project": 3}, "project"),
    ],
    ids=[
        "folder-too-long",
        "folder-tab",
        "folder-newline",
        "folder-number",
        "pinned-string",
        "pinned-number",
        "pinned-null",
        "archived-string",
        "title-blank",
        "title-null",
        "title-too-long",
        "unknown-field",
    ],
)
def test_bad_changes_are_400_naming_the_field_and_change_nothing(app, api, user, body, field):
    chat = add_conversation(app, user, "Untouched")
    before = snapshot(app)
    response = api.patch(f"/api/chats/{chat}", json={"archived": True, **body})
    assert json_error(response, 400) == "INVALID_FIELD"
    assert response.get_json()["error"]["field"] == field
    assert field in response.get_json()["error"]["message"]
    assert snapshot(app) == before


def test_a_folder_name_of_control_characters_says_so(app, api, user):
    chat = add_conversation(app, user)
    response = api.patch(f"/api/chats/{chat}", json={"folder": "a\x07b"})
    assert "control characters" in response.get_json()["error"]["message"]


def test_someone_elses_chat_is_404_and_unchanged(app, api, user, bob):
    before = snapshot(app)
    for chat in (bob["conversation"], 4242):
        response = api.patch(f"/api/chats/{chat}", json={"archived": True})
        assert json_error(response, 404) == "NOT_FOUND"
    assert snapshot(app) == before


def test_the_list_refuses_a_bad_filter(api):
    assert json_error(api.get("/api/chats?archived=yes"), 400) == "INVALID_FIELD"
    response = api.get("/api/chats?folder=" + "x" * 61)
    assert json_error(response, 400) == "INVALID_FIELD"
    assert response.get_json()["error"]["field"] == "folder"


def test_a_browser_session_needs_the_csrf_token(app, client, auth, user):
    chat = add_conversation(app, user)
    assert client.patch(f"/api/chats/{chat}", json={"pinned": True}).status_code == 400
    assert fetch(app, Conversation, chat).pinned_at is None
    response = client.patch(f"/api/chats/{chat}", json={"pinned": True}, headers=auth.headers())
    assert response.status_code == 200


# POST /api/chats/bulk


def test_bulk_archive_and_restore(app, api, user):
    chats = [add_conversation(app, user, f"Chat {n}") for n in range(3)]
    response = api.post("/api/chats/bulk", json={"ids": chats[:2], "action": "archive"})
    assert response.status_code == 200
    assert response.get_json() == {"action": "archive", "ids": chats[:2]}
    assert titles(api) == ["Chat 2"]
    api.post("/api/chats/bulk", json={"ids": [chats[0]], "action": "unarchive"})
    assert titles(api) == ["Chat 2", "Chat 0"]


def test_bulk_delete_takes_the_rows_and_cuts_a_run_in_flight(app, api, user):
    """As one delete does: a chat being answered goes with its run."""
    busy, idle, kept = (add_conversation(app, user, title) for title in ("Busy", "Idle", "Kept"))
    with database(app).session() as session:
        insert_message(session, idle, role="user", kind="user", content="hello")
        run = Run(conversation_id=busy, user_id=user, status="running")
        session.add(run)
        session.flush()
        conversation = session.get(Conversation, busy)
        conversation.status, conversation.active_run_id = ConversationStatus.STREAMING, run.id
        session.commit()
    response = api.post("/api/chats/bulk", json={"ids": [busy, idle, busy], "action": "delete"})
    assert response.get_json() == {"action": "delete", "ids": [busy, idle]}
    assert titles(api) == ["Kept"]
    assert count(app, Run) == 0
    assert fetch(app, Conversation, kept) is not None


@pytest.mark.parametrize(
    "body",
    [
        {"ids": [], "action": "archive"},
        {"ids": list(range(1, 202)), "action": "archive"},
        {"ids": [0], "action": "archive"},
        {"ids": ["1"], "action": "archive"},
        {"ids": [1], "action": "pin"},
        {"ids": [1]},
        {"ids": [1], "action": "delete", "confirm": True},
    ],
    ids=["empty", "over-200", "zero", "string-id", "unknown-action", "no-action", "unknown"],
)
def test_bad_bulk_bodies_are_400_and_change_nothing(app, api, user, body):
    add_conversation(app, user)
    before = snapshot(app)
    assert json_error(api.post("/api/chats/bulk", json=body), 400) == "INVALID_FIELD"
    assert snapshot(app) == before


@pytest.mark.parametrize("action", ["archive", "delete"])
def test_one_id_not_yours_changes_nothing(app, api, user, bob, action):
    mine = add_conversation(app, user, "Mine")
    before = snapshot(app)
    for stranger in (bob["conversation"], 4242):
        response = api.post("/api/chats/bulk", json={"ids": [mine, stranger], "action": action})
        assert json_error(response, 404) == "NOT_FOUND"
        assert str(stranger) in response.get_json()["error"]["message"]
    assert snapshot(app) == before


# The pages: the sidebar's groups, the item's actions, Move, Select, the Archived page


def htmx(auth, **extra) -> dict:
    return {**HTMX, **auth.headers(), **extra}


def _groups(html: str) -> list[str]:
    """The sidebar's group labels and chat titles, in the order shown."""
    import re

    found = re.findall(
        r'class="group-heading"[^>]*>([^<]+)<|class="folder-name">([^<]+)<|class="title">([^<]+)<',
        html,
    )
    return [next(part for part in match if part).strip() for match in found]


def test_the_sidebar_shows_pinned_then_folders_then_recent(app, client, user, bob):
    recent = add_conversation(app, user, "Loose ends")
    filed = add_conversation(app, user, "Acme brief")
    pinned = add_conversation(app, user, "Launch plan")
    archived = add_conversation(app, user, "Old idea")
    with database(app).session() as session:
        from app.db import utcnow

        session.get(Conversation, pinned).pinned_at = utcnow()
        session.get(Conversation, pinned).folder = "Acme"  # pinned wins: shown once
        session.get(Conversation, filed).folder = "Acme"
        session.get(Conversation, archived).archived_at = utcnow()
        session.commit()
    html = client.get(f"/chats/{recent}").get_data(as_text=True)
    sidebar = html[html.index('id="conversation-list"') : html.index("</aside>")]
    assert _groups(sidebar) == [
        "Pinned",
        "Launch plan",
        "Acme",
        "Acme brief",
        "Recent",
        "Loose ends",
    ]
    assert '<details class="folder-group" open>' in sidebar
    assert "Old idea" not in sidebar and "Bob" not in sidebar
    assert 'href="/chats/archived">Archived chats (1)</a>' in sidebar
    # The index opens the newest chat that is not archived.
    assert redirect_path(client.get("/")) == f"/chats/{pinned}"


def test_pin_from_the_list_answers_the_regrouped_list(app, client, auth, user):
    chat = add_conversation(app, user, "Launch plan")
    add_conversation(app, user, "Other")
    response = client.post(f"/chats/{chat}/organize", data={"pinned": "true"}, headers=htmx(auth))
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith('<div id="conversation-list"')
    assert _groups(html) == ["Pinned", "Launch plan", "Recent", "Other"]
    assert 'aria-label="Unpin Launch plan"' in html
    assert fetch(app, Conversation, chat).pinned_at is not None


def test_archive_from_the_list_takes_it_out_and_the_archived_page_restores_it(
    app, client, auth, user
):
    chat = add_conversation(app, user, "Put away")
    html = client.post(
        f"/chats/{chat}/organize", data={"archived": "true"}, headers=htmx(auth)
    ).get_data(as_text=True)
    assert "Put away" not in html and "Archived chats (1)" in html
    page = client.get("/chats/archived").get_data(as_text=True)
    assert f'id="archived-{chat}"' in page and 'aria-label="Restore Put away"' in page
    restored = client.post(
        f"/chats/{chat}/organize",
        data={"archived": "false", "view": "archived"},
        headers=htmx(auth),
    )
    assert restored.get_data(as_text=True).lstrip().startswith('<div id="archived-list"')
    assert "No archived chats" in restored.get_data(as_text=True)
    assert fetch(app, Conversation, chat).archived_at is None
    # Without script the buttons are plain forms: back to the page they came from.
    client.post(f"/chats/{chat}/organize", data={"archived": "true", "csrf_token": auth.csrf})
    response = client.post(
        f"/chats/{chat}/organize",
        data={"archived": "false", "view": "archived", "csrf_token": auth.csrf},
    )
    assert redirect_path(response) == "/chats/archived"


def test_an_archived_chat_stays_searchable_and_says_so(app, client, auth, user):
    chat = add_conversation(app, user, "Quarterly pricing")
    client.post(f"/chats/{chat}/organize", data={"archived": "true"}, headers=htmx(auth))
    html = client.get("/search?q=pricing", headers=HTMX).get_data(as_text=True)
    assert "Quarterly" in html and ">archived</span>" in html
    found = client.get("/api/search?q=pricing").get_json()
    assert [(c["chat"]["id"], c["archived"]) for c in found["chats"]] == [(chat, True)]
    page = client.get(f"/chats/{chat}").get_data(as_text=True)
    assert 'href="/chats/archived">Archived</a>' in page  # its header says so


def test_move_offers_the_existing_folders_and_a_new_one(app, client, auth, user):
    filed = add_conversation(app, user, "Filed")
    chat = add_conversation(app, user, "To move")
    client.post(f"/chats/{filed}/organize", data={"folder": "Clients"}, headers=htmx(auth))
    form = client.get(f"/chats/{chat}/folder", headers=HTMX).get_data(as_text=True)
    assert form.lstrip().startswith(f'<li id="conv-{chat}"')
    assert 'value="Clients"' in form and "No folder" in form and 'name="new_folder"' in form
    # A new name wins over the choice.
    html = client.post(
        f"/chats/{chat}/organize",
        data={"folder": "Clients", "new_folder": "  Prospects "},
        headers=htmx(auth),
    ).get_data(as_text=True)
    assert _groups(html) == ["Clients", "Filed", "Prospects", "To move", "Recent"]
    client.post(f"/chats/{chat}/organize", data={"folder": ""}, headers=htmx(auth))
    assert fetch(app, Conversation, chat).folder is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"new_folder": "x" * 61}, "at most 60 characters"),
        ({"new_folder": "a\tb"}, "control characters"),
        ({"pinned": "yes"}, "must be true or false"),
    ],
    ids=["too-long", "control", "not-a-boolean"],
)
def test_bad_list_actions_say_why_in_the_banner(app, client, auth, user, data, message):
    chat = add_conversation(app, user)
    before = snapshot(app)
    response = client.post(f"/chats/{chat}/organize", data=data, headers=htmx(auth))
    assert response.status_code == 400
    assert response.headers["HX-Retarget"] == "#banner"
    assert message in response.get_data(as_text=True)
    assert snapshot(app) == before


def test_list_actions_on_someone_elses_chat_are_404(app, client, auth, user, bob):
    before = snapshot(app)
    chat = bob["conversation"]
    assert (
        client.post(
            f"/chats/{chat}/organize", data={"pinned": "true"}, headers=htmx(auth)
        ).status_code
        == 404
    )
    assert client.get(f"/chats/{chat}/folder", headers=HTMX).status_code == 404
    response = client.post(
        "/chats/bulk", data={"ids": [chat], "action": "delete"}, headers=htmx(auth)
    )
    assert response.status_code == 404
    assert snapshot(app) == before


def test_list_actions_need_the_csrf_token(app, client, user):
    chat = add_conversation(app, user)
    assert (
        client.post(f"/chats/{chat}/organize", data={"pinned": "true"}, headers=HTMX).status_code
        == 400
    )
    assert (
        client.post(
            "/chats/bulk", data={"ids": [chat], "action": "delete"}, headers=HTMX
        ).status_code
        == 400
    )
    assert fetch(app, Conversation, chat).pinned_at is None


def test_select_archive_and_delete_from_the_list(app, client, auth, user):
    first, second, third = (add_conversation(app, user, t) for t in ("One", "Two", "Three"))
    html = client.get(f"/chats/{first}").get_data(as_text=True)
    assert 'form="bulk-form"' in html and 'hx-confirm="Archive the selected chats?"' in html
    response = client.post(
        "/chats/bulk", data={"ids": [first, second], "action": "archive"}, headers=htmx(auth)
    )
    assert _groups(response.get_data(as_text=True)) == ["Three"]
    # Deleting the chat this page shows sends the page home.
    response = client.post(
        "/chats/bulk",
        data={"ids": [third], "action": "delete"},
        headers=htmx(auth, **{"HX-Current-URL": f"http://localhost/chats/{third}"}),
    )
    assert response.headers["HX-Redirect"] == "/"
    assert fetch(app, Conversation, third) is None
    assert client.get("/chats/archived").get_data(as_text=True).count('class="archived-chat"') == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"action": "archive"}, "Select at least one chat"),
        ({"ids": [str(n) for n in range(1, 202)], "action": "archive"}, "at most 200"),
        ({"ids": ["1"], "action": "burn"}, "Say what to do"),
    ],
    ids=["none-selected", "over-200", "unknown-action"],
)
def test_bad_bulk_forms_say_why(app, client, auth, user, data, message):
    add_conversation(app, user)
    before = snapshot(app)
    response = client.post("/chats/bulk", data=data, headers=htmx(auth))
    assert response.status_code == 400 and message in response.get_data(as_text=True)
    assert snapshot(app) == before
