"""The admin area's run logs: the same record `flask chat-logs` prints, for admins only."""

from __future__ import annotations

import html

import pytest
from sqlalchemy import select

from app.accounts.models import User
from tests.factories import AuthActions, ChatDriver, add_conversation, run_log_entries
from tests.fake_model import Turn, text, tool_use
from tests.web.helpers import redirect_path


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


@pytest.fixture
def ada_chat(app, auth, fake_model):
    """Ada's conversation with one run that looked up her offers."""
    auth.create()
    auth.login()
    driver = ChatDriver(app, auth.client, auth)
    fake_model.script(
        Turn(text("Let me look."), tool_use("list_offers", {})),
        Turn(text("You have no offers yet.")),
    )
    chat_id = driver.new_chat("Ada's offers")
    run_id = driver.send(chat_id, "What do I sell?")
    assert driver.wait(run_id)["status"] == "completed"
    run_log_entries(app, run_id)
    return {"id": chat_id, "run": run_id}


@pytest.fixture
def admin(app):
    """Root, logged in on a browser of their own."""
    actions = AuthActions(app, app.test_client())
    actions.create("root@example.com", admin=True)
    actions.login("root@example.com")
    return actions.client


def _page(client, url) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return html.unescape(response.get_data(as_text=True))


def test_admin_reads_a_conversations_run_log(admin, ada_chat):
    page = _page(admin, "/admin/runs")
    assert "Ada's offers" in page
    assert "ada@example.com" in page
    conversation_url = f"/admin/conversations/{ada_chat['id']}/runs"
    assert f'href="{conversation_url}"' in page

    page = _page(admin, conversation_url)
    assert f"Conversation {ada_chat['id']}: Ada's offers" in page
    assert f"Run {ada_chat['run']}" in page and "completed" in page
    assert "2 model calls" in page
    assert "stop tool_use" in page and "stop end_turn" in page
    assert "tool_choice auto" in page
    assert "in 4," in page  # input tokens as the fake model counted them
    assert "list_offers" in page
    assert '{"offers": []}' in page  # the tool's output
    assert "done ×1" in page and "textDelta ×" in page


def test_one_run_and_the_id_form(app, admin, ada_chat):
    other = add_conversation(app, _user_id(app, "ada@example.com"), "Another chat")
    chat_id, run_id = ada_chat["id"], ada_chat["run"]

    page = _page(admin, f"/admin/conversations/{chat_id}/runs/{run_id}")
    assert f"Run {run_id}" in page and "1 run shown" in page
    assert admin.get(f"/admin/conversations/{other}/runs/{run_id}").status_code == 404
    assert admin.get(f"/admin/conversations/{chat_id}/runs/999999").status_code == 404
    assert admin.get("/admin/conversations/999999/runs").status_code == 404

    found = admin.get(f"/admin/runs?conversation={chat_id}")
    assert redirect_path(found) == f"/admin/conversations/{chat_id}/runs"
    missing = admin.get("/admin/runs?conversation=999999")
    assert missing.status_code == 404
    assert "There is no conversation 999999." in missing.get_data(as_text=True)
    assert admin.get("/admin/runs?conversation=abc").status_code == 400


def test_conversations_of_one_person(app, admin, ada_chat):
    root_chat = add_conversation(app, _user_id(app, "root@example.com"), "Root's own chat")
    ada = _user_id(app, "ada@example.com")

    page = _page(admin, f"/admin/runs?user={ada}")
    assert "Conversations of ada@example.com" in page
    assert "Ada's offers" in page and "Root's own chat" not in page
    assert "Root's own chat" in _page(admin, "/admin/runs")
    assert admin.get("/admin/runs?user=999999").status_code == 404
    assert admin.get("/admin/runs?user=abc").status_code == 404
    assert f"/admin/conversations/{root_chat}/runs" in _page(admin, "/admin/runs")


def test_reachable_from_the_admin_area(app, admin, ada_chat):
    assert 'href="/admin/runs"' in _page(admin, "/admin/users")
    ada = _user_id(app, "ada@example.com")
    assert f'href="/admin/runs?user={ada}"' in _page(admin, "/admin/users")
    assert 'href="/admin/runs"' in _page(admin, "/admin/guidelines")


def test_non_admin_is_refused(client, ada_chat):
    chat_id, run_id = ada_chat["id"], ada_chat["run"]
    for url in (
        "/admin/runs",
        f"/admin/runs?conversation={chat_id}",
        f"/admin/conversations/{chat_id}/runs",
        f"/admin/conversations/{chat_id}/runs/{run_id}",
    ):
        response = client.get(url)
        assert response.status_code == 403, url
        assert "list_offers" not in response.get_data(as_text=True)
    assert 'href="/admin/runs"' not in client.get("/settings").get_data(as_text=True)


def test_logged_out_visitor_is_sent_to_login(app, ada_chat):
    response = app.test_client().get(f"/admin/conversations/{ada_chat['id']}/runs")
    assert redirect_path(response) == "/login"


def _user_id(app, email) -> int:
    with app.extensions["database"].session() as session:
        return session.scalar(select(User.id).where(User.email == email))
