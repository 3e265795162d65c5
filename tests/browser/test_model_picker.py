"""The chat header's model picker as a person meets it: reached by Tab, changed with the
arrow keys, kept (focus stays on it after its swap), and the next reply comes from the
model picked. The header with the picker is audited (axe) at desktop and phone width."""

from __future__ import annotations

import json

from app.chat.models import Conversation
from app.chat.offered_models import ModelSpec, add_model
from tests.browser.helpers import audit, log_in, wait_until
from tests.fake_model import Turn, text
from tests.waiting import eventually


def _list_models(live_app) -> None:
    with live_app.extensions["database"].session() as session:
        add_model(session, "claude-haiku-5-5", ModelSpec("Haiku"), 200_000)
        add_model(session, "claude-opus-5", ModelSpec("Opus", credits=7), 200_000)
        session.commit()


def _make_chat(page, live_server) -> int:
    csrf = json.loads(page.get_attribute("body", "hx-headers"))["X-CSRFToken"]
    response = page.request.post(f"{live_server.url}/api/chats", headers={"X-CSRFToken": csrf})
    assert response.status == 201, response.text()
    return response.json()["id"]


def _chosen(live_app, chat_id: int) -> str | None:
    with live_app.extensions["database"].session() as session:
        return session.get(Conversation, chat_id).model


def test_a_model_is_picked_by_keyboard_and_answers_the_next_message(
    page, live_server, live_app, person, context, fake_model
):
    _list_models(live_app)
    log_in(page, live_server)
    chat_id = _make_chat(page, live_server)
    page.goto(f"{live_server.url}/chats/{chat_id}")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    assert page.input_value("#model-select") == "claude-haiku-5-5"  # the default
    assert audit(page) == []

    page.focus("#chat-title")  # a heading: Tab starts from the top, through the sidebar
    for _ in range(80):
        if page.evaluate("document.activeElement.id") == "model-select":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "model-select"
    page.keyboard.press("ArrowDown")  # a closed select changes at once: change fires
    eventually(lambda: _chosen(live_app, chat_id) == "claude-opus-5", 10, "the pick stored")
    wait_until(page, "!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')")
    assert page.input_value("#model-select") == "claude-opus-5"
    assert page.evaluate("document.activeElement.id") == "model-select"  # focus kept

    fake_model.script(Turn(text("Opus here.")))
    page.fill("#composer-input", "Hello")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Opus here.", timeout=30_000)  # a loaded machine
    assert fake_model.requests[-1]["model"] == "claude-opus-5"

    page.set_viewport_size({"width": 390, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.is_visible("#model-select")
    assert audit(page) == []
    assert context.page_errors == []


def test_a_new_chat_is_started_on_the_model_picked_before_its_first_message(
    page, live_server, live_app, person, context, fake_model
):
    _list_models(live_app)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/chats/new")
    page.focus("#model-select")
    page.keyboard.press("ArrowDown")
    assert page.input_value("#model-select") == "claude-opus-5"
    assert audit(page) == []

    fake_model.script(Turn(text("Opus from the start.")))
    page.fill("#composer-input", "Hello")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Opus from the start.", timeout=30_000)
    assert fake_model.requests[-1]["model"] == "claude-opus-5"
    assert page.input_value("#model-select") == "claude-opus-5"  # the chat's header says so
    assert context.page_errors == []
