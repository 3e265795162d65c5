"""First run in a real browser: sign up (which signs you in), answer the welcome step,
watch the suggested first requests arrive in the empty chat, start a chat with one; then
personal instructions saved in settings reach the next turn's system prompt."""

from __future__ import annotations

import json

from tests.browser.helpers import screenshot, wait_until
from tests.fake_model import Turn, text

STARTERS = [
    {"title": "Ads for the spring blend", "prompt": "Write three Meta ads for our spring blend."},
    {"title": "Quiz: find your roast", "prompt": "Make a quiz that recommends one of our roasts."},
    {"title": "Welcome emails", "prompt": "Draft a welcome sequence for new subscribers."},
]


def test_onboarding_starters_and_instructions(live_server, page, fake_model):
    url = live_server.url
    # The starters take a moment (the page polls meanwhile); then the chat's reply; then
    # the reply to the message sent after the instructions changed.
    fake_model.script(
        Turn(text(json.dumps({"starters": STARTERS})), delay_first=1.5),
        Turn(text("Here are three ads for the spring blend.")),
        Turn(text("Cheerio, noted.")),
    )

    page.goto(f"{url}/signup")
    page.fill("input[name=email]", "new@example.com")
    page.fill("input[name=password]", "a fine password")
    page.fill("input[name=confirm]", "a fine password")
    page.click("button[type=submit]")
    # Signed in at once: the welcome step, with no second trip through the login page.
    page.wait_for_selector("#welcome-form")
    assert page.locator(".flashes", has_text="Welcome to Loopdesk.").count() == 1
    assert page.url.rstrip("/") == url  # the welcome step, shown at /

    page.fill("input[name=role]", "Founder")
    page.fill("input[name=company]", "Acme Roasters")
    page.click("#welcome-form button[value=save]")
    page.wait_for_url(f"{url}/")
    page.locator("#starters").wait_for()
    # Polling replaces the note with the cards once they are written.
    card = page.locator(".starter-card", has_text=STARTERS[0]["title"])
    card.wait_for(timeout=10_000)
    assert page.locator(".starter-card").count() == len(STARTERS)
    assert page.locator(".starters-pending").count() == 0
    screenshot(page, "onboarding-starters")

    card.click()
    page.wait_for_url(f"{url}/chats/*")
    first_user_row = page.locator("#rows .row-user").first
    first_user_row.wait_for()
    assert first_user_row.locator(".row-body").inner_text().strip() == STARTERS[0]["prompt"]
    page.locator("#rows .row-host", has_text="Here are three ads").wait_for()
    assert page.locator("#starters").count() == 0
    chat_url = page.url
    assert STARTERS[0]["prompt"] in json.dumps(fake_model.requests[-1]["messages"])

    # Personal instructions, saved through htmx on the settings page.
    page.goto(f"{url}/settings")
    page.fill("#instructions-text", "Always answer in British English.")
    page.click("#instructions button[type=submit]")
    page.locator("#instructions .saved").wait_for()
    page.locator('#memory-history tr[data-action="instructions"]').wait_for()

    page.goto(chat_url)
    page.wait_for_selector("body[data-socket=open]", state="attached")
    requests_before = len(fake_model.requests)
    page.fill("#composer-input", "Say hello")
    page.keyboard.press("Enter")
    page.locator("#rows .row-host", has_text="Cheerio, noted.").wait_for()
    wait_until(page, "document.querySelector('#composer:not(.busy)')")
    assert len(fake_model.requests) > requests_before
    assert "Always answer in British English." in fake_model.requests[-1]["system"]
    assert context_errors(page) == []


def context_errors(page) -> list[str]:
    return list(page.context.page_errors)
