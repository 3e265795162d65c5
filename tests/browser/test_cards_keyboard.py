"""The multi-step campaign briefing, completed with the keyboard alone."""

from __future__ import annotations

import json

from app.workspace.models import Offer, Persona
from tests.browser.helpers import log_in, new_chat, wait_until
from tests.fake_model import Turn, text, tool_use


def _tab_to(page, selector: str, limit: int = 20) -> None:
    """Press Tab until the focused element matches (only keys are pressed)."""
    for _ in range(limit):
        if page.evaluate(
            "(s) => document.activeElement && document.activeElement.matches(s)", selector
        ):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def _focused(page) -> str:
    return page.evaluate("document.activeElement.name || document.activeElement.tagName")


def test_the_briefing_can_be_completed_with_the_keyboard_alone(
    page, live_server, person, fake_model, live_app
):
    with live_app.extensions["database"].session() as session:
        offer = Offer(user_id=person[2], name="Trailhead Coffee", description="Beans")
        session.add(offer)
        session.flush()
        session.add(Persona(user_id=person[2], offer_id=offer.id, name="Weekend Barista"))
        session.commit()
        offer_id = offer.id
    fake_model.script(
        Turn(text("Let's plan it."), tool_use("collect_campaign_briefing", {}, id="toolu_brief"))
    )
    log_in(page, live_server)
    new_chat(page, live_server)
    page.fill("#composer-input", "Plan a campaign")
    page.keyboard.press("Enter")
    page.wait_for_selector(".card-q[data-status=awaiting]")
    wait_until(page, "document.activeElement && document.activeElement.name === 'goal'")

    next_button = ".card-q [data-card-next]:not([hidden])"
    for step in ("goal", "offer", "audience", "channels"):
        assert _focused(page) == step
        page.keyboard.press("Space")  # choose the first option
        _tab_to(page, next_button)
        page.keyboard.press("Enter")
    # Text steps are text areas (Enter adds a line there): type, then Tab to Next.
    for step, typed in (("budget", "$500 per month"), ("timing", "Start in June"), ("notes", "")):
        wait_until(page, f"document.activeElement.name === '{step}'")
        page.keyboard.type(typed)
        _tab_to(page, next_button)
        page.keyboard.press("Enter")
    page.wait_for_selector(".card-q [data-card-review]:not([hidden])")
    assert "$500 per month" in page.inner_text(".card-q [data-card-review]")
    fake_model.script(Turn(text("Briefing saved.")))
    _tab_to(page, ".card-q [data-card-submit]")
    page.keyboard.press("Enter")

    page.wait_for_selector(".row-host:has-text('Briefing saved.')")
    # The card answered, the person goes on in the message box.
    wait_until(page, "document.activeElement && document.activeElement.id === 'composer-input'")
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["tool_use_id"] == "toolu_brief"
    answers = json.loads(result["content"])["answers"]
    assert answers["offer"] == offer_id
    assert answers["budget"] == "$500 per month" and answers["timing"] == "Start in June"
    assert len(answers["channels"]) == 1 and answers["goal"]
    assert page.locator(".card-q[data-status=answered]").count() == 1


def test_the_first_tab_reaches_the_skip_links_and_a_phone_hint_has_no_keys(
    browser, page, live_server, person
):
    log_in(page, live_server)
    new_chat(page, live_server)
    wait_until(page, "document.activeElement && document.activeElement.id === 'composer-input'")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to the message box"
    assert "Shift+Enter" in page.inner_text("#composer-hint")  # a keyboard's hint

    phone = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    phone.add_cookies(page.context.cookies())
    phone_page = phone.new_page()
    phone_page.goto(page.url)
    hint = phone_page.inner_text("#composer-hint")
    assert "Shift+Enter" not in hint and "Enter sends" not in hint and hint.startswith("Attach")
    phone.close()
