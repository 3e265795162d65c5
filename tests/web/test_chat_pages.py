"""The conversation list and chat page: create, open, rename, delete."""

from __future__ import annotations

import pytest

from app.chat.models import Conversation, Message
from app.chat.rows import insert_message
from tests.web.helpers import (
    add_conversation,
    count,
    database,
    fetch,
    redirect_path,
    snapshot,
)

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
    assert html.index("first words") < html.index("a reply")
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


def test_create_with_htmx_answers_201_and_hx_redirect(app, client, user, auth):
    response = client.post("/chats", headers=htmx(auth))
    assert response.status_code == 201
    with database(app).session() as session:
        conversation = session.query(Conversation).one()
    assert conversation.user_id == user
    assert conversation.title == "New chat"
    assert response.headers["HX-Redirect"] == f"/chats/{conversation.id}"
    assert client.get(response.headers["HX-Redirect"]).status_code == 200


def test_create_from_a_plain_form_redirects(app, client, user, auth):
    response = client.post("/chats", data={"csrf_token": auth.csrf})
    assert redirect_path(response).startswith("/chats/")
    assert count(app, Conversation, Conversation.user_id == user) == 1


def test_create_without_csrf_token_creates_nothing(app, client, user):
    response = client.post("/chats", headers=HTMX)
    assert response.status_code == 400
    assert count(app, Conversation) == 0


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
