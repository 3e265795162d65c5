"""A finished run's steps stay on the page as a collapsed "N steps" summary, live and after a
reload."""

from __future__ import annotations

from app.llm.demo import agent_output
from app.workspace.models import Offer
from tests.browser.helpers import log_in, new_chat, wait_until
from tests.fake_model import Turn, text, tool_use


def test_the_runs_steps_stay_as_a_summary_with_links(
    page, live_server, live_app, person, fake_model, context
):
    with live_app.extensions["database"].session() as session:
        offer = Offer(user_id=person[2], name="Calm Mornings", description="Coaching")
        session.add(offer)
        session.commit()
        offer_id = offer.id
    fake_model.script(
        Turn(text("Let me look at your offers."), tool_use("list_offers", {})),
        Turn(
            text("Writing your ads."),
            tool_use("ad_copy", {"instructions": "Ads", "offer_id": offer_id}),
        ),
        Turn(
            tool_use("submit_ad_copy", agent_output("ad-copy", {"name": "Calm Mornings"})),
            token_delay=0.01,
            # The sub-agent stays at work long enough for a loaded machine's page to see it.
            stall_after=1,
            stall_seconds=2.0,
        ),
        Turn(text("Here are your ads."), token_delay=0.02),
    )
    log_in(page, live_server)
    new_chat(page, live_server)
    page.evaluate("() => { window.notReloaded = true; }")
    page.fill("#composer-input", "Ads for my coaching")
    page.keyboard.press("Enter")

    # The first run in a fresh worker pays the SDK's import, so the wait is generous.
    page.wait_for_selector("#timeline-steps :text('Writing Ad copy')", timeout=30_000)
    summary = page.wait_for_selector("#m-2 details.run-steps summary")
    wait_until(page, "document.getElementById('timeline-steps') === null")
    assert page.evaluate("() => window.notReloaded === true")
    assert summary.inner_text().startswith("2 steps")
    steps = page.locator("#m-2 .run-steps .run-step")
    assert not steps.first.is_visible()  # collapsed
    summary.click()
    assert steps.all_inner_texts()[0].startswith("Looked up your offers")
    assert steps.all_inner_texts()[1].startswith("Wrote ad copy")
    link = page.locator("#m-2 .run-steps a:has-text('Open the result')")
    output_href = link.get_attribute("href")
    assert output_href.startswith("/workspace/outputs/")
    assert "list_offers" not in page.inner_text("#m-2 .run-steps")

    page.reload()
    page.wait_for_selector("#m-2 details.run-steps")
    assert page.locator("details.run-steps").count() == 1
    assert page.inner_text("#m-2 .run-steps summary").startswith("2 steps")
    page.click("#m-2 .run-steps summary")
    page.click("#m-2 .run-steps a:has-text('Open the result')")
    page.wait_for_url(f"{live_server.url}{output_href}")
    assert context.page_errors == []
