"""An admin deletes a person: their data goes in one transaction, their sessions and
tokens stop working, what they did to others' data stays anonymised, others untouched."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.accounts.models import ApiToken, User
from app.chat.models import Conversation, Message
from app.chat.rows import insert_message
from app.memory.models import MemoryChange
from app.workspace.models import Offer
from tests.factories import PASSWORD, AuthActions, add_conversation, add_offer, add_token, add_user
from tests.web.helpers import (
    anonymous_csrf,
    assert_redirects_to_login,
    bearer,
    count,
    database,
    json_error,
    redirect_path,
    snapshot,
)


@pytest.fixture
def admin(app, client, auth):
    user_id = auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    return user_id


@pytest.fixture
def bob(app):
    """Logged in on his own browser, with a chat (and a row), an offer and a token."""
    user_id = add_user(app, "bob@example.com")
    chat = add_conversation(app, user_id, "Bob's chat")
    with database(app).session() as session:
        insert_message(session, chat, role="user", kind="text", content="Bob's words")
        session.commit()
    add_offer(app, user_id, "Bob's Bakery")
    _, raw = add_token(app, user_id)
    browser = app.test_client()
    AuthActions(app, browser).login("bob@example.com")
    return {"id": user_id, "chat": chat, "token": raw, "browser": browser}


@pytest.fixture
def ada(app):
    user_id = add_user(app, "ada@example.com")
    chat = add_conversation(app, user_id, "Ada's chat")
    _, raw = add_token(app, user_id)
    with database(app).session() as session:
        # Bob once changed Ada's memory (as an admin would): the record stays, nameless.
        session.add(
            MemoryChange(
                user_id=user_id, actor_id=bob_id(app), action="add", fact="x", source="admin"
            )
        )
        session.commit()
    return {"id": user_id, "chat": chat, "token": raw}


def bob_id(app) -> int:
    with database(app).session() as session:
        return session.scalar(select(User.id).where(User.email == "bob@example.com"))


def delete(client, auth, user_id, email="bob@example.com", csrf=True):
    data = {"email": email, **({"csrf_token": auth.csrf} if csrf else {})}
    return client.post(f"/admin/users/{user_id}/delete", data=data)


def test_deleting_a_person_removes_their_data_and_ends_their_sessions(
    app, client, auth, admin, bob, ada
):
    assert bob["browser"].get("/api/chats").status_code == 200
    page = client.get("/admin/users").get_data(as_text=True)
    assert f'href="/admin/users/{bob["id"]}/delete"' in page
    confirm = client.get(f"/admin/users/{bob['id']}/delete")
    assert confirm.status_code == 200 and "1 chat " in confirm.get_data(as_text=True)

    response = delete(client, auth, bob["id"])
    assert redirect_path(response) == "/admin/users"
    assert "Deleted bob@example.com" in client.get("/admin/users").get_data(as_text=True)

    # His cookie and his token stop working.
    assert json_error(bob["browser"].get("/api/chats"), 401) == "UNAUTHORIZED"
    assert_redirects_to_login(bob["browser"].get("/settings"))
    script = app.test_client()
    assert json_error(script.get("/api/chats", headers=bearer(bob["token"])), 401)
    # His data is gone.
    assert count(app, User, User.id == bob["id"]) == 0
    assert count(app, Conversation, Conversation.user_id == bob["id"]) == 0
    assert count(app, Message, Message.conversation_id == bob["chat"]) == 0
    assert count(app, Offer, Offer.user_id == bob["id"]) == 0
    assert count(app, ApiToken, ApiToken.user_id == bob["id"]) == 0
    # What he did to Ada's memory stays, without his name; Ada is untouched.
    with database(app).session() as session:
        change = session.scalars(select(MemoryChange)).one()
    assert (change.user_id, change.actor_id) == (ada["id"], None)
    listed = script.get("/api/chats", headers=bearer(ada["token"]))
    assert [c["title"] for c in listed.get_json()["chats"]] == ["Ada's chat"]


def test_a_new_account_never_gets_a_deleted_persons_id(app, client, auth, admin, bob):
    stale = bob["browser"]
    delete(client, auth, bob["id"])
    newcomer = add_user(app, "carol@example.com")
    assert newcomer > bob["id"]
    assert_redirects_to_login(stale.get("/settings"))


@pytest.mark.parametrize(
    ("email", "csrf"),
    [("bob@example.com", False), ("someone@example.com", True), ("", True)],
    ids=["no-csrf", "wrong-email", "no-email"],
)
def test_deleting_needs_the_csrf_token_and_the_typed_email(
    app, client, auth, admin, bob, email, csrf
):
    before = snapshot(app)
    response = delete(client, auth, bob["id"], email=email, csrf=csrf)
    assert response.status_code == 400
    assert snapshot(app) == before
    assert bob["browser"].get("/api/chats").status_code == 200


def test_the_typed_email_ignores_case_and_spaces(app, client, auth, admin, bob):
    assert redirect_path(delete(client, auth, bob["id"], email=" BOB@example.com ")) == (
        "/admin/users"
    )
    assert count(app, User, User.id == bob["id"]) == 0


def test_only_admins_delete_people(app, bob, ada):
    before = snapshot(app)
    response = bob["browser"].get(f"/admin/users/{ada['id']}/delete")
    assert response.status_code == 403
    script = app.test_client()
    response = script.post(
        f"/admin/users/{ada['id']}/delete",
        data={"email": "ada@example.com"},
        headers=bearer(bob["token"]),
    )
    assert response.status_code == 403
    assert snapshot(app) == before


def test_an_admin_cannot_delete_themselves_here(app, client, auth, admin):
    response = client.post(
        f"/admin/users/{admin}/delete", data={"email": "root@example.com", "csrf_token": auth.csrf}
    )
    assert redirect_path(response) == "/admin/users"
    assert count(app, User, User.id == admin) == 1
    assert client.get("/settings").status_code == 200


def test_deleting_someone_unknown_is_404(client, admin, auth):
    assert client.get("/admin/users/999/delete").status_code == 404
    assert delete(client, auth, 999).status_code == 404


def test_the_person_can_log_in_never_again(app, client, auth, admin, bob):
    delete(client, auth, bob["id"])
    other = app.test_client()
    data = {"email": "bob@example.com", "password": PASSWORD, "csrf_token": anonymous_csrf(other)}
    assert other.post("/login", data=data).status_code == 400


def test_deleting_someone_whose_reply_is_streaming_cancels_the_run_cleanly(
    make_app, fake_model, caplog
):
    import logging

    from tests.factories import ChatDriver
    from tests.fake_model import Turn, text

    app = make_app(anthropic_base_url=fake_model.base_url)
    fake_model.script(Turn(text("a long answer " * 80), token_delay=0.05))
    bob_auth = AuthActions(app, app.test_client())
    bob = bob_auth.create("bob@example.com")
    bob_auth.login("bob@example.com")
    driver = ChatDriver(app, bob_auth.client, bob_auth)
    run_id = driver.send(driver.new_chat(), "Tell me everything")
    fake_model.wait_for_requests(1)
    future = app.extensions["executor"].futures[run_id]

    admin_auth = AuthActions(app, app.test_client())
    admin_auth.create("root@example.com", admin=True)
    admin_auth.login("root@example.com")
    assert redirect_path(delete(admin_auth.client, admin_auth, bob)) == "/admin/users"

    assert future.result(timeout=5) == "cancelled"
    assert fake_model.replies == []  # cut, not read to its end
    assert count(app, Conversation) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
