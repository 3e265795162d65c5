"""The conversation list and chat page: create, open, rename, delete."""

from __future__ import annotations

import re

import pytest

from app.chat.models import Conversation, Message
from app.chat.rows import insert_message
from tests.factories import add_conversation
from tests.web.helpers import count, database, fetch, redirect_path, snapshot

HTMX = {"HX-Request": "true"}


def htmx(auth, **extra) -> dict:
    return {**HTMX, **auth.headers(), **extra}


def api_titles(client) -> list[str]:
    return [chat["title"] for chat in client.get("/api/chats").get_json()["chats"]]


# Opening


def test_index_without_chats_shows_the_empty_state(client, user):
    response = client.get("/")
    assert response.status_code == 200
    assert "Start your first chat" in response.get_data(as_text=True)


def test_index_opens_the_latest_chat(app, client, user):
    add_conversation(app, user, "Older")
    newest = add_conversation(app, user, "Newest")
    assert redirect_path(client.get("/")) == f"/chats/{newest}"


def test_index_ignores_other_peoples_chats(client, user, bob):
    response = client.get("/")
    assert response.status_code == 200
    assert "Bob&#39;s private chat" not in response.get_data(as_text=True)


def test_chat_page_shows_visible_rows_in_order(app, client, user, bob):
    conversation_id = add_conversation(app, user, "Launch plan")
    with database(app).session() as session:
        insert_message(session, conversation_id, role="user", kind="user", content="first words")
        insert_message(
            session,
            conversation_id,
            role="user",
            kind="user",
            content="secret tool blocks",
            meta={"hidden": True},
        )
        insert_message(session, conversation_id, role="assistant", kind="host", content="a reply")
        session.commit()
    html = client.get(f"/chats/{conversation_id}").get_data(as_text=True)
    assert '<h1 id="chat-title">Launch plan</h1>' in html
    rows = html[html.index('id="rows"') :]  # (the list's "Notify me when a reply is ready")
    assert rows.index("first words") < rows.index("a reply")
    assert "secret tool blocks" not in html
    assert "Bob&#39;s private chat" not in html


def test_titles_are_escaped(app, client, user):
    conversation_id = add_conversation(app, user, "<script>alert(1)</script>")
    html = client.get(f"/chats/{conversation_id}").get_data(as_text=True)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_someone_elses_chat_page_is_404(client, user, bob):
    response = client.get(f"/chats/{bob['conversation']}")
    assert response.status_code == 404
    assert "Bob&#39;s private chat" not in response.get_data(as_text=True)


# Creating


def test_new_chat_is_a_link_to_a_draft(app, client, user):
    html = client.get("/").get_data(as_text=True)
    assert 'href="/chats/new"' in html and "+ New chat" in html
    response = client.get("/chats/new")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert '<h1 id="chat-title">New chat</h1>' in html
    assert 'hx-post="/chats/start"' in html  # its composer creates the chat
    assert "ws-connect" not in html  # nothing to listen to yet
    assert re.search(r'<textarea id="composer-input"[^>]*>\s*</textarea>', html)  # empty
    assert count(app, Conversation) == 0


def test_empty_new_chats_leave_nothing_behind(app, client, user, auth):
    for _ in range(3):
        assert client.get("/chats/new").status_code == 200
    # The old form route opens the draft too, and stores nothing.
    response = client.post("/chats", headers=htmx(auth))
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == "/chats/new"
    assert redirect_path(client.post("/chats", data={"csrf_token": auth.csrf})) == "/chats/new"
    assert count(app, Conversation) == 0
    assert client.get("/").status_code == 200  # still the empty state: no chat to open


def test_the_drafts_first_message_creates_the_chat(app, client, user, auth):
    response = client.post("/chats/start", data={"message": "Plan my launch"}, headers=htmx(auth))
    assert response.status_code == 201
    with database(app).session() as session:
        conversation = session.query(Conversation).one()
        first = session.query(Message).filter_by(conversation_id=conversation.id).first()
    assert conversation.user_id == user
    assert conversation.title == "Plan my launch"
    assert first.content == "Plan my launch"
    assert response.headers["HX-Redirect"] == f"/chats/{conversation.id}"


def test_a_drafts_empty_message_is_refused_in_the_banner(app, client, user, auth):
    response = client.post("/chats/start", data={"message": "  "}, headers=htmx(auth))
    assert response.status_code == 400
    assert response.headers["HX-Retarget"] == "#banner"
    assert "Write a message first." in response.get_data(as_text=True)
    assert count(app, Conversation) == 0


def test_create_without_csrf_token_creates_nothing(app, client, user):
    response = client.post("/chats", headers=HTMX)
    assert response.status_code == 400
    response = client.post("/chats/start", data={"message": "Hi"}, headers=HTMX)
    assert response.status_code == 400
    assert count(app, Conversation) == 0


def test_a_deleted_chats_id_is_never_reused(app, client, user, auth):
    """SQLite hands out the largest rowid again without AUTOINCREMENT: the newest chat's
    URL would open the next one. (On PostgreSQL sequences never go back.)"""
    older = add_conversation(app, user, "Older")
    newest = add_conversation(app, user, "Newest")
    assert client.post(f"/chats/{newest}/delete", headers=htmx(auth)).status_code == 200
    client.post("/chats/start", data={"message": "Next one"}, headers=htmx(auth))
    with database(app).session() as session:
        ids = sorted(c.id for c in session.query(Conversation))
    assert ids[0] == older and ids[1] > newest
    assert client.get(f"/chats/{newest}").status_code == 404


# Renaming


@pytest.fixture
def chat(app, user):
    return add_conversation(app, user, "Old title")


def test_rename_form_partial(client, chat):
    response = client.get(f"/chats/{chat}/rename", headers=HTMX)
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith(f'<li id="conv-{chat}"')
    assert 'name="title" value="Old title"' in html
    assert 'name="csrf_token"' in html
    assert "<html" not in html


def test_rename_with_htmx_returns_the_item_partial(app, client, auth, chat):
    response = client.post(
        f"/chats/{chat}/rename", data={"title": "  New title "}, headers=htmx(auth)
    )
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith(f'<li id="conv-{chat}"')
    assert '<span class="title">New title</span>' in html
    assert fetch(app, Conversation, chat).title == "New title"
    assert api_titles(client) == ["New title"]


def test_rename_of_the_open_chat_also_updates_its_header(app, client, auth, chat):
    headers = htmx(auth, **{"HX-Current-URL": f"http://localhost/chats/{chat}"})
    response = client.post(f"/chats/{chat}/rename", data={"title": "Spring <b>"}, headers=headers)
    html = response.get_data(as_text=True)
    assert f'<li id="conv-{chat}" class="conversation-item current"' in html
    assert '<h1 id="chat-title" hx-swap-oob="true">Spring &lt;b&gt;</h1>' in html
    # From another chat's page the header is not touched.
    headers = htmx(auth, **{"HX-Current-URL": "http://localhost/chats/999"})
    html = client.post(f"/chats/{chat}/rename", data={"title": "X"}, headers=headers).get_data(
        as_text=True
    )
    assert "chat-title" not in html


def test_a_cancelled_rename_keeps_the_open_chat_marked_current(client, auth, chat):
    on_its_page = htmx(auth, **{"HX-Current-URL": f"http://localhost/chats/{chat}#m-3"})
    html = client.get(f"/chats/{chat}/item", headers=on_its_page).get_data(as_text=True)
    assert f'<li id="conv-{chat}" class="conversation-item current"' in html
    assert 'aria-current="page"' in html
    elsewhere = htmx(auth, **{"HX-Current-URL": "http://localhost/chats/999"})
    html = client.get(f"/chats/{chat}/item", headers=elsewhere).get_data(as_text=True)
    assert f'<li id="conv-{chat}" class="conversation-item"' in html
    assert "aria-current" not in html


def test_a_rename_is_the_persons_title(app, client, auth, chat):
    client.post(f"/chats/{chat}/rename", data={"title": "Mine"}, headers=htmx(auth))
    assert fetch(app, Conversation, chat).title_source == "person"


def test_a_rename_reaches_the_persons_other_tabs(app, client, auth, user, chat):
    subscription = app.extensions["services"].hub.subscribe(12345, user)
    try:
        client.post(f"/chats/{chat}/rename", data={"title": "Elsewhere"}, headers=htmx(auth))
        event = subscription.get(timeout=2)
    finally:
        subscription.close()
    assert event.kind == "conversation"
    assert event.conversation["id"] == chat and event.conversation["title"] == "Elsewhere"


def test_rename_from_a_plain_form_redirects(app, client, auth, chat):
    response = client.post(
        f"/chats/{chat}/rename", data={"title": "Plain", "csrf_token": auth.csrf}
    )
    assert redirect_path(response) == f"/chats/{chat}"
    assert fetch(app, Conversation, chat).title == "Plain"


def test_rename_accepts_120_characters(app, client, auth, chat):
    response = client.post(f"/chats/{chat}/rename", data={"title": "x" * 120}, headers=htmx(auth))
    assert response.status_code == 200
    assert fetch(app, Conversation, chat).title == "x" * 120


@pytest.mark.parametrize(
    "data",
    [{"title": ""}, {"title": "   "}, {"title": "x" * 121}],
    ids=["empty", "blank", "121-chars"],
)
def test_rename_with_bad_title_is_400_and_changes_nothing(app, client, auth, chat, data):
    before = snapshot(app)
    response = client.post(f"/chats/{chat}/rename", data=data, headers=htmx(auth))
    assert response.status_code == 400
    html = response.get_data(as_text=True)
    assert 'role="alert"' in html
    assert 'name="title"' in html  # the form comes back to fix
    assert snapshot(app) == before


def test_rename_without_a_title_field_keeps_the_old_one(app, client, auth, chat):
    """A post that leaves the field out (a script) changes nothing, like other forms."""
    response = client.post(f"/chats/{chat}/rename", data={}, headers=htmx(auth))
    assert response.status_code in (200, 400)
    assert fetch(app, Conversation, chat).title == "Old title"


def test_rename_without_csrf_token_changes_nothing(app, client, chat):
    response = client.post(f"/chats/{chat}/rename", data={"title": "Sneaky"}, headers=HTMX)
    assert response.status_code == 400
    assert fetch(app, Conversation, chat).title == "Old title"


def test_rename_someone_elses_chat_is_404(app, client, auth, user, bob):
    before = snapshot(app)
    path = f"/chats/{bob['conversation']}/rename"
    assert client.get(path, headers=HTMX).status_code == 404
    response = client.post(path, data={"title": "Mine now"}, headers=htmx(auth))
    assert response.status_code == 404
    assert snapshot(app) == before
    assert fetch(app, Conversation, bob["conversation"]).title == "Bob's private chat"


def test_item_partial(client, chat, bob):
    response = client.get(f"/chats/{chat}/item", headers=HTMX)
    assert response.status_code == 200
    assert '<span class="title">Old title</span>' in response.get_data(as_text=True)
    assert client.get(f"/chats/{bob['conversation']}/item", headers=HTMX).status_code == 404


# Deleting


def test_delete_with_htmx(app, client, auth, user, chat):
    keep = add_conversation(app, user, "Keep me")
    with database(app).session() as session:
        insert_message(session, chat, role="user", kind="user", content="bye")
        session.commit()
    response = client.post(f"/chats/{chat}/delete", headers=htmx(auth))
    assert response.status_code == 200
    assert "HX-Redirect" not in response.headers
    assert api_titles(client) == ["Keep me"]
    assert fetch(app, Conversation, chat) is None
    assert count(app, Message, Message.conversation_id == chat) == 0
    assert fetch(app, Conversation, keep) is not None
    assert client.get(f"/chats/{chat}").status_code == 404


def test_delete_the_open_chat_sends_you_home(client, auth, chat):
    headers = htmx(auth, **{"HX-Current-URL": f"http://localhost/chats/{chat}"})
    response = client.post(f"/chats/{chat}/delete", headers=headers)
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == "/"


def test_delete_from_a_plain_form_redirects(app, client, auth, chat):
    response = client.post(f"/chats/{chat}/delete", data={"csrf_token": auth.csrf})
    assert redirect_path(response) == "/"
    assert fetch(app, Conversation, chat) is None


def test_delete_without_csrf_token_keeps_the_chat(app, client, chat):
    response = client.post(f"/chats/{chat}/delete", headers=HTMX)
    assert response.status_code == 400
    assert fetch(app, Conversation, chat) is not None


def test_delete_someone_elses_chat_is_404(app, client, auth, user, bob):
    before = snapshot(app)
    response = client.post(f"/chats/{bob['conversation']}/delete", headers=htmx(auth))
    assert response.status_code == 404
    assert snapshot(app) == before


def test_delete_a_missing_chat_is_404(client, auth, user):
    assert client.post("/chats/4242/delete", headers=htmx(auth)).status_code == 404
