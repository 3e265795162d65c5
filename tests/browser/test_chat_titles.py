"""Titles in a real browser: "+ New chat" is a draft until its first message; the proposed
title and a rename reach the header, the tab title and the sidebar of every tab, live."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.chat.models import Conversation
from tests.browser.helpers import log_in, wait_until
from tests.fake_model import Turn, text, tool_use


@pytest.fixture
def live_app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, chat_titles=True)


def _chats(live_app) -> int:
    with live_app.extensions["database"].session() as session:
        return session.scalar(select(func.count(Conversation.id)))


def _opened_chat(page) -> int:
    """The chat the draft's first message created: its page, once the browser is there."""
    page.wait_for_url(lambda url: url.rsplit("/", 1)[1].isdigit())
    return int(page.url.rsplit("/", 1)[1])


def _shows_title(page, chat_id: int, title: str) -> None:
    wait_until(page, f"document.getElementById('chat-title').textContent.trim() === {title!r}")
    wait_until(page, f"document.title === {title + ' · Loopdesk'!r}")
    wait_until(
        page,
        f"document.querySelector('#conv-{chat_id} .title').textContent.trim() === {title!r}",
    )


def test_new_chat_is_a_draft_until_its_first_message(
    page, live_server, live_app, person, fake_model
):
    fake_model.script(
        Turn(text("Hello! Happy to help."), token_delay=0.02),
        Turn(tool_use("submit_title", {"title": "Greeting"})),
    )
    log_in(page, live_server)
    for _ in range(2):
        page.goto(f"{live_server.url}/")
        page.click("text=+ New chat")
        page.wait_for_url(f"{live_server.url}/chats/new")
    assert page.inner_text("#chat-title") == "New chat"
    assert _chats(live_app) == 0

    page.fill("#composer-input", "Hello there")
    page.keyboard.press("Enter")

    chat_id = _opened_chat(page)
    page.wait_for_selector("#m-2:has-text('Happy to help')")
    assert page.inner_text("#m-1 .row-body") == "Hello there"
    assert _chats(live_app) == 1
    _shows_title(page, chat_id, "Greeting")


def test_titles_follow_live_in_this_tab_and_another(
    page, live_server, live_app, person, fake_model, context
):
    fake_model.script(
        Turn(text("Here are three spring launch ideas."), token_delay=0.02),
        # Late enough for the second tab to be listening (2 s was not, once, on a slow
        # machine under the whole suite: the title came before the second tab showed).
        Turn(tool_use("submit_title", {"title": "Spring launch ideas"}), delay_first=5.0),
    )
    log_in(page, live_server)
    page.goto(f"{live_server.url}/chats/new")
    page.fill("#composer-input", "Give me launch ideas for spring")
    page.keyboard.press("Enter")
    chat_id = _opened_chat(page)
    page.wait_for_selector("body[data-socket=open]", state="attached")
    other = context.new_page()
    other.goto(f"{live_server.url}/chats/{chat_id}")
    other.wait_for_selector("body[data-socket=open]", state="attached")
    for tab in (page, other):
        tab.evaluate("() => { window.notReloaded = true; }")
        assert tab.inner_text("#chat-title") == "Give me launch ideas for spring"

    # Proposed after the first exchange.
    for tab in (page, other):
        _shows_title(tab, chat_id, "Spring launch ideas")

    # Renamed in the other tab.
    other.hover(f"#conv-{chat_id}")
    other.click(f"#conv-{chat_id} button:has-text('Rename')")
    other.fill(f"#title-{chat_id}", "Our spring plan")
    other.click(f"#conv-{chat_id} button:has-text('Save')")
    for tab in (other, page):
        _shows_title(tab, chat_id, "Our spring plan")
        assert tab.evaluate("() => window.notReloaded === true")
    assert other.locator(f"#conv-{chat_id}.current").count() == 1
    assert context.page_errors == []
