"""The chat page in a real browser: streaming, timeline, cards, reloads, second tabs."""

from __future__ import annotations

from tests.browser.conftest import log_in
from tests.fake_model import Turn, text


def _new_chat(page, live_server):
    page.goto(f"{live_server.url}/")
    page.click("text=+ New chat")
    page.wait_for_selector("#composer-input")


def test_a_message_streams_in_and_becomes_a_row(page, live_server, person, fake_model, context):
    fake_model.script(
        Turn(text("Hello Ada, here is a **bold** idea for your launch."), token_delay=0.03)
    )
    log_in(page, live_server)
    _new_chat(page, live_server)

    page.fill("#composer-input", "Give me an idea")
    page.keyboard.press("Enter")

    page.wait_for_selector("#live-text:has-text('Hello Ada')")
    page.wait_for_selector("#m-2 strong:has-text('bold')")
    assert page.inner_text("#m-1") == "Give me an idea"
    page.wait_for_function("document.getElementById('live-text') === null")
    assert page.is_enabled("#composer-input")
    assert context.page_errors == []
