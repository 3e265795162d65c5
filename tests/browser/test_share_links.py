"""Sharing a chat as people do it, on a phone: the Share menu by keyboard (a link shown
once, its expiry, Revoke), the shared page read logged out, and a reader who logs in from
it and continues the chat as their own."""

from __future__ import annotations

import re

from tests.browser.helpers import audit, log_in, new_chat, send_message, wait_until
from tests.factories import PASSWORD, add_user
from tests.fake_model import Turn, text

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def test_share_read_logged_out_continue_and_revoke(
    browser, live_server, live_app, person, fake_model
):
    add_user(live_app, "bob@example.com")
    ada = browser.new_context(**PHONE).new_page()
    ada.set_default_timeout(10_000)
    log_in(ada, live_server)
    chat_id = new_chat(ada, live_server)
    fake_model.script(Turn(text("Here is **the plan**.")))
    send_message(ada, "Plan the launch")
    ada.wait_for_selector("#rows .row-host")

    # The Share menu, by keyboard: open it, choose an expiry, make the link.
    ada.focus("#share-menu > summary")
    ada.keyboard.press("Enter")
    ada.wait_for_selector("#share-panel", state="visible")
    ada.select_option("#share-expires", "7")
    ada.focus("#share-panel .share-make button[type=submit]")
    ada.keyboard.press("Enter")
    link = ada.wait_for_selector("#share-link").inner_text()
    assert re.fullmatch(rf"{re.escape(live_server.url)}/s/[A-Za-z0-9_-]{{43}}", link)
    # The Copy button has the focus (the button that made the link was swapped away).
    wait_until(ada, "document.activeElement.textContent === 'Copy'")
    assert "expires on" in ada.inner_text("#share-state")
    assert audit(ada) == []
    assert ada.evaluate("document.documentElement.scrollWidth") <= 390
    # Esc closes the menu, its button keeping the focus; Enter opens it again.
    ada.keyboard.press("Escape")
    ada.wait_for_selector("#share-panel", state="hidden")
    assert ada.evaluate("document.activeElement.closest('#share-menu') !== null")
    ada.keyboard.press("Enter")
    ada.wait_for_selector("#share-panel", state="visible")

    # Logged out, the link reads the chat; the way to continue is to log in.
    reader = browser.new_context(**PHONE).new_page()
    reader.set_default_timeout(10_000)
    reader.goto(link)
    assert reader.is_visible("h1#shared-title")
    assert reader.locator("#rows strong", has_text="the plan").count() == 1
    assert reader.locator("#composer-input").count() == 0
    reader.click("text=Log in to continue in a chat of your own")
    reader.fill("input[name=email]", "bob@example.com")
    reader.fill("input[name=password]", PASSWORD)
    reader.click("button[type=submit]")
    reader.wait_for_url(link)
    reader.click("#share-continue button")
    reader.wait_for_url(re.compile(r".*/chats/\d+$"))
    assert int(reader.url.rsplit("/", 1)[1]) != chat_id
    reader.wait_for_selector("#rows .row-host strong:has-text('the plan')")

    # Revoke, by keyboard: the link is gone.
    ada.focus("#share-panel .share-revoke")
    ada.keyboard.press("Enter")
    ada.wait_for_selector("#share-state:has-text('Not shared')")
    wait_until(ada, "document.activeElement.textContent === 'Make a link'")  # once settled
    gone = reader.goto(link)
    assert gone is not None and gone.status == 404
