"""Regenerate and edit as branches in a real browser: the pager, reloads, a second tab,
editing in place, and all of it from the keyboard."""

from __future__ import annotations

from tests.browser.helpers import audit, log_in, new_chat, send_message, wait_until
from tests.fake_model import Turn, text, tool_use


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


LAST_ROW = "#rows > article.row:last-of-type"


def _visible(page, selector):
    return page.locator(f"{selector} >> visible=true")


def test_an_answer_of_text_a_card_and_text_has_one_action_row_at_its_end(
    context, page, live_server, person, fake_model
):
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    options = [{"label": "Blue", "value": "blue"}, {"label": "Red", "value": "red"}]
    fake_model.script(
        Turn(
            text("Let me ask first."),
            tool_use("ask_user", {"question": "Which colour?", "options": options}),
        ),
        Turn(text("Blue it **is**.")),
    )
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Pick my brand colour")
    page.wait_for_selector(".card-q[data-status=awaiting]")
    _idle(page)
    page.check(".card-q input[type=radio] >> nth=0")
    page.click(".card-q [data-card-submit]")
    page.wait_for_selector(f"{LAST_ROW}.row-host:has-text('Blue it is.')")
    _idle(page)

    # One Copy and one Regenerate for the whole answer, after its last row (below the card).
    assert page.locator("#rows > article.row:not(.row-user)").count() >= 2
    assert _visible(page, ".row-regenerate").count() == 1
    assert _visible(page, ".answer-copy").count() == 1
    assert _visible(page, f"{LAST_ROW} .answer-actions").count() == 1
    card_box = page.locator(".card-q").bounding_box()
    actions = _visible(page, ".answer-actions")
    assert actions.bounding_box()["y"] > card_box["y"] + card_box["height"]
    assert _visible(page, ".row-edit").count() == 1  # the person's message keeps its Edit

    # Copy takes the whole answer: every host row's Markdown, in order.
    _visible(page, ".answer-copy").click()
    page.wait_for_selector(".answer-copy.copied >> visible=true")
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied.startswith("Let me ask first.") and copied.endswith("Blue it **is**.")

    # A phone: the time and the actions are one line; a row before the last only its time.
    page.set_viewport_size({"width": 360, "height": 740})
    last_meta = page.locator(f"{LAST_ROW} > .row-meta").bounding_box()
    assert last_meta["height"] <= 48, last_meta
    earlier = page.locator("#rows > article.row-card > .row-meta").bounding_box()
    assert earlier["height"] <= 30, earlier
    page.set_viewport_size({"width": 1280, "height": 860})

    # After a regenerate, the answer's pager is in that one action row, below the card.
    fake_model.script(Turn(text("Try green.")))
    _visible(page, ".row-regenerate").click()
    page.wait_for_selector(f"{LAST_ROW}:has-text('Try green.') .branch-count:has-text('2/2')")
    _idle(page)
    page.click(f"{LAST_ROW} .branch-step[data-dir=prev]")
    page.wait_for_selector(".card-q")
    page.wait_for_selector(f"{LAST_ROW}:has-text('Blue it is.')")
    pager = _visible(page, ".branch-pager")
    assert pager.count() == 1
    assert pager.inner_text().replace("\n", "").startswith("‹1/2")
    assert page.locator(f"{LAST_ROW} .branch-pager").is_visible()
    card_box = page.locator(".card-q").bounding_box()
    assert pager.bounding_box()["y"] > card_box["y"] + card_box["height"]
    assert _visible(page, ".row-regenerate").count() == 1
    page.click(f"{LAST_ROW} .branch-step[data-dir=next]")
    page.wait_for_selector(f"{LAST_ROW}:has-text('Try green.') .branch-count:has-text('2/2')")

    # Dark, on a phone: axe-core finds nothing serious.
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 390, "height": 844})
    assert audit(page) == []
    assert fake_model.rejections == []
    assert context.page_errors == []
