"""Regenerate and edit as branches in a real browser: the pager, reloads, a second tab,
editing in place, and all of it from the keyboard."""

from __future__ import annotations

from tests.browser.helpers import log_in, new_chat, send_message, wait_until
from tests.fake_model import Turn, text


def _answered(page, live_server, fake_model, message, answer):
    fake_model.script(Turn(text(answer), token_delay=0.005))
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    send_message(page, message)
    page.wait_for_selector(f".row-host:has-text('{answer}')")
    page.wait_for_selector("#composer:not(.busy)")
    return chat_id


def _idle(page):
    page.wait_for_selector("#composer:not(.busy)")


def test_regenerate_then_switch_between_the_two_answers(
    context, page, live_server, person, fake_model
):
    chat_id = _answered(page, live_server, fake_model, "Give me a headline", "First answer.")
    other = context.new_page()
    other.goto(f"{live_server.url}/chats/{chat_id}")
    other.wait_for_selector("body[data-socket=open]", state="attached")
    fake_model.script(Turn(text("Second answer."), token_delay=0.01))

    page.click("#m-2 .row-regenerate")

    page.wait_for_selector("#m-3:has-text('Second answer.') .branch-count:has-text('2/2')")
    assert page.locator("#m-2").count() == 0
    _idle(page)
    page.click("#m-3 .branch-step[data-dir=prev]")
    page.wait_for_selector("#m-2:has-text('First answer.') .branch-count:has-text('1/2')")
    assert page.locator("#m-3").count() == 0
    assert page.is_disabled("#m-2 .branch-step[data-dir=prev]")
    # The other tab follows the switch.
    other.wait_for_selector("#m-2:has-text('First answer.') .branch-count:has-text('1/2')")
    assert other.locator("#m-3").count() == 0

    page.click("#m-2 .branch-step[data-dir=next]")
    page.wait_for_selector("#m-3:has-text('Second answer.') .branch-count:has-text('2/2')")
    other.wait_for_selector("#m-3 .branch-count:has-text('2/2')")

    # The choice is stored: a reload shows the same branch.
    page.click("#m-3 .branch-step[data-dir=prev]")
    page.wait_for_selector("#m-2 .branch-count:has-text('1/2')")
    page.reload()
    page.wait_for_selector("#m-2:has-text('First answer.') .branch-count:has-text('1/2')")
    assert page.locator("#m-3").count() == 0
    assert fake_model.rejections == []
    assert context.page_errors == []


def test_edit_a_message_in_place_and_see_the_new_answer(page, live_server, person, fake_model):
    _answered(page, live_server, fake_model, "Tell me about blue", "Blue is calm.")

    # Esc cancels, and keeps what was there.
    page.click("#m-1 .row-edit")
    page.fill(".row-edit-form textarea", "Never mind")
    page.keyboard.press("Escape")
    assert page.locator(".row-edit-form").count() == 0
    assert page.inner_text("#m-1 .row-body") == "Tell me about blue"

    fake_model.script(Turn(text("Red is bold."), token_delay=0.01))
    page.click("#m-1 .row-edit")
    page.fill(".row-edit-form textarea", "Tell me about red")
    page.click(".row-edit-form button[type=submit]:has-text('Save')")

    page.wait_for_selector("#m-3:has-text('Tell me about red') .branch-count:has-text('2/2')")
    page.wait_for_selector("#m-4:has-text('Red is bold.')")
    assert page.locator("#m-1, #m-2").count() == 0
    _idle(page)
    page.click("#m-3 .branch-step[data-dir=prev]")
    page.wait_for_selector("#m-1:has-text('Tell me about blue') .branch-count:has-text('1/2')")
    page.wait_for_selector("#m-2:has-text('Blue is calm.')")
    assert fake_model.requests[-1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Tell me about red"}]}
    ]
    assert fake_model.rejections == []


def test_regenerate_edit_and_the_pager_work_from_the_keyboard(
    context, page, live_server, person, fake_model
):
    _answered(page, live_server, fake_model, "Name my course", "Morning Mastery.")
    assert page.get_attribute("#m-2 .row-regenerate", "aria-label") == "Regenerate this answer"
    assert page.get_attribute("#m-1 .row-edit", "aria-label") == "Edit this message"

    fake_model.script(Turn(text("Calm Starts."), token_delay=0.005))
    page.focus("#m-2 .row-regenerate")
    page.keyboard.press("Enter")
    page.wait_for_selector("#m-3 .branch-count:has-text('2/2')")
    _idle(page)
    assert page.get_attribute("#m-3 .branch-step[data-dir=prev]", "aria-label") == (
        "Previous version"
    )

    # The pager keeps focus across the re-render: Enter, then Enter again goes back.
    page.focus("#m-3 .branch-step[data-dir=prev]")
    page.keyboard.press("Enter")
    page.wait_for_selector("#m-2 .branch-count:has-text('1/2')")
    wait_until(
        page, "document.activeElement && document.activeElement.matches('#m-2 .branch-step')"
    )
    page.keyboard.press("Enter")  # prev is disabled at 1/2, so focus went to next
    page.wait_for_selector("#m-3 .branch-count:has-text('2/2')")
    wait_until(
        page, "document.activeElement && document.activeElement.matches('#m-3 .branch-step')"
    )

    # Edit: Enter on the button opens the editor focused; Enter sends; Esc would cancel.
    fake_model.script(Turn(text("Evening Ease."), token_delay=0.005))
    page.focus("#m-1 .row-edit")
    page.keyboard.press("Enter")
    wait_until(page, "document.activeElement && document.activeElement.tagName === 'TEXTAREA'")
    page.keyboard.press("Control+A")
    page.keyboard.type("Name my evening course")
    page.keyboard.press("Enter")
    page.wait_for_selector(
        ".row-user:has-text('Name my evening course') .branch-count:has-text('2/2')"
    )
    page.wait_for_selector(".row-host:has-text('Evening Ease.')")
    assert fake_model.rejections == []
    assert context.page_errors == []
