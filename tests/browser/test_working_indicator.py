"""The working indicator: "Thinking…" (or "The model is busy, retrying…") counts the
seconds until the first token, for the sending page and for one opened mid-wait, and goes
as soon as text starts."""

from __future__ import annotations

from tests.browser.helpers import log_in, new_chat, send_message, wait_until
from tests.fake_model import Turn, api_error, text

WORDS = " ".join(f"w{n}" for n in range(150))


def _elapsed(page) -> int:
    return int(page.inner_text("#live-status .live-status-elapsed").rstrip("s"))


def test_thinking_counts_the_seconds_until_the_first_token_then_goes(
    page, live_server, person, fake_model, context
):
    fake_model.script(
        Turn(text("Here is your answer, " + WORDS[:120]), delay_first=2.5, token_delay=0.05)
    )
    log_in(page, live_server)
    new_chat(page, live_server)

    send_message(page, "Take your time")

    page.wait_for_selector("#live-status:has-text('Thinking…')")
    assert page.get_attribute("#live-status", "role") == "status"
    wait_until(
        page, "document.querySelector('#live-status .live-status-elapsed')?.textContent === '2s'"
    )
    # The text starts: the indicator is gone while the answer streams in.
    page.wait_for_selector("#live-text:has-text('Here is your answer')")
    assert page.locator("#live-status[data-state]").count() == 0
    assert not page.is_visible("#live-status")
    page.wait_for_selector("#m-2:has-text('Here is your answer')")
    # The run is over: the live area is idle (its live text and indicator empty).
    wait_until(
        page,
        "!document.querySelector('#live-area .timeline, #live-text:not(:empty), #live-status:not(:empty)')",
    )
    assert context.page_errors == []


def test_a_page_opened_while_the_model_thinks_shows_the_wait_so_far(
    context, page, live_server, person, fake_model
):
    fake_model.script(Turn(text("Worth the wait."), delay_first=6.0))
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    send_message(page, "Slowly please")
    page.wait_for_selector("#live-status:has-text('Thinking…')")
    page.wait_for_timeout(1500)

    other = context.new_page()
    other.goto(f"{live_server.url}/chats/{chat_id}")
    other.wait_for_selector("body[data-socket=open]", state="attached")

    other.wait_for_selector("#live-status:has-text('Thinking…')")
    assert _elapsed(other) >= 1, "the wait is counted from when the message was sent"
    other.wait_for_selector("#m-2:has-text('Worth the wait.')")
    wait_until(other, "document.querySelector('#live-status[data-state]') === null")
    assert other.locator("#live-text:not(:empty)").count() == 0


def test_a_busy_model_shows_retrying_until_it_answers(page, live_server, person, fake_model):
    fake_model.script(api_error(529, "overloaded_error", retry_after=2), Turn(text("Back again.")))
    log_in(page, live_server)
    new_chat(page, live_server)

    send_message(page, "Hello?")

    page.wait_for_selector(
        "#live-status[data-state=retrying]:has-text('The model is busy, retrying…')"
    )
    page.wait_for_selector("#m-2:has-text('Back again.')")
    assert page.locator("#live-status[data-state]").count() == 0


def test_a_failing_model_server_is_not_called_busy(page, live_server, person, fake_model):
    fake_model.script(api_error(500, "api_error", retry_after=2), Turn(text("Fixed now.")))
    log_in(page, live_server)
    new_chat(page, live_server)

    send_message(page, "Hello?")

    page.wait_for_selector(
        "#live-status[data-state=retrying]:has-text('The model server had an error, retrying…')"
    )
    assert "busy" not in page.inner_text("#live-status")
    page.wait_for_selector("#m-2:has-text('Fixed now.')")


def test_a_model_error_shows_once_in_its_row(page, live_server, person, fake_model, context):
    fake_model.script(api_error(400, "invalid_request_error", "Your request was malformed"))
    log_in(page, live_server)
    new_chat(page, live_server)

    send_message(page, "Hello?")

    page.wait_for_selector("#m-2.row-error:has-text('Your request was malformed')")
    wait_until(page, "!document.querySelector('#composer.busy')")  # the run is over
    assert page.locator("#banner.banner-shown").count() == 0
    assert "malformed" not in page.inner_text("#banner")  # no toast over the title
    assert context.page_errors == []
