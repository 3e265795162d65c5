"""The composer's Queue and Steer, the queue above it, unread chats and runs that finish
with no page open (app/web/queue_pages.py, app/chat/unread.py)."""

from __future__ import annotations

import contextlib
import json

import pytest

from app.chat.models import Conversation
from tests.fake_model import Turn, text
from tests.live import LiveServer, connect_socket, wait_subscribed
from tests.waiting import eventually

HTMX = {"HX-Request": "true"}
WORDS = " ".join(f"word{n}" for n in range(200))


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


def _streaming(app, chat_id, at_least=10):
    hub = app.extensions["services"].hub
    eventually(lambda: len(hub.live_state(chat_id).text) >= at_least, 10, "nothing streamed")


def test_queued_messages_show_above_the_composer_after_a_reload(app, chat, fake_model):
    fake_model.script(Turn(text(WORDS), token_delay=0.03))
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Go")
    _streaming(app, chat_id)
    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert 'data-send="queue"' in page and 'data-send="steer"' in page  # busy: Queue, Steer

    answer = chat.client.post(
        f"/chats/{chat_id}/queue",
        data={"message": "Then a headline", "csrf_token": chat.auth.csrf},
        headers=HTMX,
    )

    assert answer.status_code == 200
    html = answer.get_data(as_text=True)
    assert 'id="queue"' in html and "Then a headline" in html and "queued" in html
    reloaded = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert 'class="queue-item"' in reloaded and "Then a headline" in reloaded
    # Its × takes it off; every page's queue follows.
    queued_id = chat.client.get(f"/api/chats/{chat_id}/queue").get_json()["queue"][0]["id"]
    removed = chat.client.post(
        f"/chats/{chat_id}/queue/{queued_id}/delete",
        data={"csrf_token": chat.auth.csrf},
        headers=HTMX,
    )
    assert removed.status_code == 200 and "Then a headline" not in removed.get_data(as_text=True)
    chat.post(f"/api/chats/{chat_id}/stop", {})
    chat.wait(run_id)


def test_an_empty_queue_or_steer_says_what_is_wrong(app, chat):
    chat_id = chat.new_chat()
    for route in ("queue", "steer"):
        answer = chat.client.post(
            f"/chats/{chat_id}/{route}", data={"csrf_token": chat.auth.csrf}, headers=HTMX
        )
        assert answer.status_code == 400 and "Write a message first." in answer.get_data(
            as_text=True
        )


def test_a_reply_that_ends_while_you_look_elsewhere_marks_the_chat_unread(app, chat, fake_model):
    fake_model.script("Ready.")
    chat_id = chat.new_chat("Report")
    other = chat.new_chat("Elsewhere")
    chat.wait(chat.send(chat_id, "Write it"))

    listed = {c["id"]: c for c in chat.client.get("/api/chats").get_json()["chats"]}
    assert listed[chat_id]["unread"] is True and listed[other]["unread"] is False
    projects = chat.client.get("/api/projects").get_json()["projects"]
    assert sum(project["unread"] for project in projects) == 1
    page = chat.client.get(f"/chats/{other}").get_data(as_text=True)
    assert 'class="unread-dot"' in page and '<span class="visually-hidden">unread</span>' in page
    assert "Notify me when a reply is ready" in page

    # Opening it reads it.
    chat.client.get(f"/chats/{chat_id}")
    listed = {c["id"]: c for c in chat.client.get("/api/chats").get_json()["chats"]}
    assert listed[chat_id]["unread"] is False
    # A Stop does not mark it (the person was there); the read route clears it too.
    with app.extensions["database"].session() as session:
        session.get_one(Conversation, chat_id).unread = True
        session.commit()
    read = chat.post(f"/api/chats/{chat_id}/read", {})
    assert read.status_code == 200 and read.get_json()["unread"] is False


@contextlib.contextmanager
def _json_socket_on_a_reply(app, auth, fake_model, token_delay: float):
    """A live server, a person's new chat, and its JSON socket open while a long reply is
    scripted: (driver, socket, chat id)."""
    from tests.factories import ChatDriver

    live = LiveServer(app).start()
    app.config["LOOPDESK"] = app.config["LOOPDESK"].model_copy(update={"public_url": live.url})
    try:
        user_id = auth.create()
        auth.login()
        driver = ChatDriver(app, auth.client, auth, user_id)
        _, raw = _token(app, user_id)
        chat_id = driver.new_chat()
        fake_model.script(Turn(text(WORDS), token_delay=token_delay))
        ws = connect_socket(
            f"{live.ws_url}/ws/chats/{chat_id}?format=json",
            headers={"Authorization": f"Bearer {raw}"},
        )
        wait_subscribed(app, chat_id)
        yield driver, ws, chat_id
    finally:
        live.stop()


def test_a_run_finishes_and_is_stored_after_its_socket_closes(app, auth, fake_model):
    with _json_socket_on_a_reply(app, auth, fake_model, 0.01) as (driver, ws, chat_id):
        run_id = driver.send(chat_id, "A long one")
        first = json.loads(ws.receive(timeout=10))
        assert first["type"] == "message"
        ws.close()  # the tab closes mid-run

        assert driver.wait(run_id)["status"] == "completed"
        rows = driver.rows(chat_id)
        assert [r["kind"] for r in rows] == ["user", "host"] and rows[1]["content"] == WORDS


def test_the_json_socket_hears_the_queue_change(app, auth, fake_model):
    with _json_socket_on_a_reply(app, auth, fake_model, 0.03) as (driver, ws, chat_id):
        run_id = driver.send(chat_id, "Go")
        _streaming(app, chat_id)
        driver.post(f"/api/chats/{chat_id}/loop", {"message": "Later", "when": "after"})

        def queue_frame():
            while (raw_frame := ws.receive(timeout=0.5)) is not None:
                frame = json.loads(raw_frame)
                if frame["type"] == "queue":
                    return frame
            return None

        frame = eventually(queue_frame, 10, "no queue frame")
        assert [item["message"] for item in frame["items"]] == ["Later"]
        ws.close()
        driver.post(f"/api/chats/{chat_id}/stop", {})
        driver.wait(run_id)


def _token(app, user_id):
    from tests.factories import add_token

    return add_token(app, user_id)
