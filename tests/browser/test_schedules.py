"""Scheduling a message as people do it, on a phone, by keyboard: the chat header's
Schedule panel in the browser's time zone (a refusal said in place, the form kept), the
next run in that zone, Pause and Resume, Delete; and a scheduled message arriving on the
open page, answered, when the scheduler's pass sends it."""

from __future__ import annotations

from datetime import timedelta

from app.chat.scheduler import run_due
from app.cli.scheduler import scheduler_parts
from app.db import utcnow
from tests.browser.helpers import audit, log_in, new_chat, wait_until
from tests.fake_model import Turn, text

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


# htmx has wired the focused button's form (a swapped panel is wired as it settles; a
# press before that would post the form without script, and load the page anew).
WIRED = "document.activeElement.form?.['htmx-internal-data']?.initHash"


def _press(page, selector: str) -> None:
    page.focus(selector)
    if page.evaluate("Boolean(document.activeElement.form)"):
        wait_until(page, WIRED)
    page.keyboard.press("Enter")


def test_schedule_by_keyboard_pause_resume_delete_and_the_message_arrives(
    browser, live_server, live_app, person, fake_model
):
    context = browser.new_context(timezone_id="Asia/Tokyo", **PHONE)
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)

    _press(page, "#schedule-menu > summary")
    page.wait_for_selector("#schedule-panel", state="visible")
    assert "Nothing scheduled" in page.inner_text("#schedule-panel")
    assert page.input_value("#schedule-timezone") == "Asia/Tokyo"  # the browser's own

    # A phrase the panel cannot read: said in place, the form as typed, the focus on When.
    page.fill("#schedule-when", "now and then")
    page.fill("#schedule-message", "What changed overnight?")
    _press(page, "#schedule-panel .schedule-add button[type=submit]")
    page.wait_for_selector("#schedule-error[role=alert]")
    wait_until(page, "document.activeElement.id === 'schedule-when'")
    assert page.input_value("#schedule-message") == "What changed overnight?"
    assert page.input_value("#schedule-timezone") == "Asia/Tokyo"
    assert audit(page) == []

    page.fill("#schedule-when", "every day at 7:30")
    _press(page, "#schedule-panel .schedule-add button[type=submit]")
    item = page.wait_for_selector("#schedule-panel .schedule-item")
    shown = item.inner_text()
    assert "What changed overnight?" in shown and "At 07:30 every day" in shown
    assert "07:30 JST" in shown and "Asia/Tokyo" in shown
    assert audit(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 390

    wait_until(page, "document.activeElement.id === 'schedule-when'")  # ready for another
    _press(page, "#schedule-panel .schedule-actions button:has-text('Pause')")
    page.wait_for_selector("#schedule-panel .badge:has-text('Paused')")
    # The swapped panel gives the focus back to the same schedule's button, now Resume.
    wait_until(page, f"document.activeElement.textContent === 'Resume' && {WIRED}")
    page.keyboard.press("Enter")
    page.wait_for_selector("#schedule-panel .schedule-next:has-text('Next:')")
    wait_until(page, "document.activeElement.textContent === 'Pause'")

    # The scheduler's pass (its clock a day on): the message and its answer arrive.
    fake_model.script(Turn(text("Nothing changed overnight.")))
    report = run_due(scheduler_parts(live_app), utcnow() + timedelta(days=1))
    assert len(report.sent) == 1
    page.wait_for_selector("#rows .row-user:has-text('What changed overnight?')")
    # The run's first model call (the client made on first use) may be slow on a loaded
    # machine: a longer wait, never a sleep.
    page.wait_for_selector("#rows .row-host:has-text('Nothing changed overnight.')", timeout=30_000)

    # Esc closes the panel, its button keeping the focus; Delete empties it.
    page.focus("#schedule-when")
    page.keyboard.press("Escape")
    page.wait_for_selector("#schedule-panel", state="hidden")
    assert page.evaluate("document.activeElement.closest('#schedule-menu') !== null")
    page.keyboard.press("Enter")
    _press(page, "#schedule-panel .schedule-actions button:has-text('Delete')")
    page.wait_for_selector("#schedule-panel:has-text('Nothing scheduled')")
    listed = page.request.get(f"{live_server.url}/api/chats/{chat_id}/schedules")
    assert listed.json() == {"schedules": []}
    assert errors == []
    context.close()
