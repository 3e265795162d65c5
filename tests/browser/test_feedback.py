"""Feedback and the context gauge in a real browser: the thumbs by keyboard alone, the
comment after a thumbs down, kept over a reload; the gauge in the header, updated live."""

from __future__ import annotations

from tests.browser.helpers import audit, log_in, new_chat, send_message
from tests.fake_model import Turn, text


def test_rate_an_answer_by_keyboard_and_see_the_gauge_follow(
    context, page, live_server, person, fake_model
):
    fake_model.script(Turn(text("Calm mornings, made simple."), token_delay=0.005))
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    label = page.inner_text("#context-gauge")
    assert label.startswith("Context ") and "Last turn" not in label
    send_message(page, "A tagline, please")
    page.wait_for_selector("#m-2:has-text('Calm mornings') #m-2-feedback")
    page.wait_for_selector("#composer:not(.busy)")
    # The run's end reached the header: what it cost, and the history that grew.
    page.wait_for_selector("#context-gauge:has-text('Last turn: 2 credits')")
    assert page.get_attribute("#context-gauge-meter", "value") is not None

    # From Regenerate, Tab reaches the thumbs; Enter presses one.
    page.focus("#m-2 .row-regenerate")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Good answer"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.wait_for_selector("#m-2 .feedback-down[aria-pressed=true]")
    assert page.get_attribute("#m-2 .feedback-up", "aria-pressed") == "false"
    # The comment form takes the focus; typing and Enter on its button sends it.
    page.wait_for_selector("#m-2-feedback-comment:focus")
    page.keyboard.type("It ignored my offer.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.wait_for_selector("#m-2 button:has-text('Update comment')")
    assert audit(page) == []

    page.reload()
    page.wait_for_selector("#m-2 .feedback-down[aria-pressed=true]")
    assert page.input_value("#m-2-feedback-comment") == "It ignored my offer."
    # Pressing the pressed thumb takes the rating back.
    page.focus("#m-2 .feedback-down")
    page.keyboard.press("Space")
    page.wait_for_selector("#m-2 .feedback-down[aria-pressed=false]")
    assert page.locator("#m-2-feedback-comment").count() == 0
    assert context.page_errors == []
    assert chat_id
