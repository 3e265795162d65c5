"""Stop keeps the partial answer with a quiet "Stopped" marker, also after a reload; with
nothing written yet, a "Stopped" notice says so."""

from __future__ import annotations

from tests.browser.helpers import log_in, new_chat, send_message
from tests.fake_model import Turn, text

WORDS = " ".join(f"w{n}" for n in range(150))


def test_stop_mid_stream_keeps_the_partial_answer_after_a_reload(
    page, live_server, person, fake_model, context
):
    fake_model.script(Turn(text(WORDS), token_delay=0.04))
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Talk for a long time")
    page.wait_for_selector("#live-text:has-text('w10 ')")

    page.click("button.stop")

    page.wait_for_selector("#m-2 .row-stopped:has-text('Stopped')")
    page.wait_for_selector("#composer:not(.busy)")  # the Stop's own answer says so
    page.wait_for_selector("#live-text:not(:empty)", state="detached")  # then the run's end
    kept = page.inner_text("#m-2 .row-body")
    assert kept.startswith("w0 w1 w2") and "w149" not in kept

    page.reload()

    page.wait_for_selector("body[data-socket=open]", state="attached")
    assert page.inner_text("#m-2 .row-body") == kept
    assert page.inner_text("#m-2 .row-stopped") == "Stopped"
    assert page.locator(".row-stopped").count() == 1
    assert page.locator("#live-status[data-state]").count() == 0
    assert context.page_errors == []


def test_stop_before_the_first_token_shows_a_stopped_notice(page, live_server, person, fake_model):
    fake_model.script(Turn(text("Too late."), delay_first=8))
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Think hard")
    page.wait_for_selector("#live-status:has-text('Thinking…')")

    page.click("button.stop")

    page.wait_for_selector("#m-2.row-notice:has-text('Stopped')")
    page.wait_for_selector("#composer:not(.busy)")
    page.wait_for_selector("#live-status[data-state]", state="detached")
    page.reload()
    page.wait_for_selector("#m-2.row-notice:has-text('Stopped')")
