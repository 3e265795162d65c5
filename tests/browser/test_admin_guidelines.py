"""The shared guidelines page in a real browser: an inline edit updates the preview."""

from __future__ import annotations

from app.accounts.service import create_user
from app.agents.guidelines import guidelines_from_file
from tests.browser.helpers import log_in, wait_until
from tests.factories import PASSWORD

ADMIN = "root@example.com"


def _admin(live_app):
    with live_app.extensions["database"].session() as session:
        create_user(session, ADMIN, PASSWORD, is_admin=True)
        session.commit()


def test_admin_edits_a_guideline_and_the_preview_follows(live_app, live_server, page):
    _admin(live_app)
    log_in(page, live_server, ADMIN)
    page.goto(f"{live_server.url}/admin/guidelines")
    old = guidelines_from_file()[1].text
    preview = page.locator("#prompt-preview pre")
    assert old in preview.inner_text()

    rule = page.locator("li.guideline", has_text=old)
    rule_id = rule.get_attribute("id")
    rule.get_by_role("button", name="Edit").click()
    textarea = page.locator(f"#{rule_id} textarea")
    textarea.wait_for()
    new = "Never draw separator lines, boxes or ASCII art."
    textarea.fill(new)
    page.locator(f"#{rule_id}").get_by_role("button", name="Save").click()

    page.locator(f"#{rule_id} .guideline-text", has_text=new).wait_for()
    wait_until(
        page,
        f"document.querySelector('#prompt-preview pre').textContent.includes({new!r})",
    )
    assert old not in preview.inner_text()
    page.locator('#guideline-history tr[data-action="edited"]').wait_for()

    # Another agent's preview carries the edit too.
    page.select_option("#preview-agent", "quiz")
    wait_until(page, "document.querySelector('#prompt-preview').dataset.agent === 'quiz'")
    assert new in preview.inner_text()

    # A bad edit shows the error next to the rule and changes nothing.
    rule = page.locator(f"#{rule_id}")
    rule.get_by_role("button", name="Edit").click()
    page.locator(f"#{rule_id} textarea").fill("   ")
    page.locator(f"#{rule_id}").get_by_role("button", name="Save").click()
    page.locator(f"#{rule_id} [role=alert]", has_text="Write the rule").wait_for()
    assert new in preview.inner_text()
    page.locator(f"#{rule_id}").get_by_role("button", name="Cancel").click()

    # Moving the rule up reorders the list and the preview.
    page.locator(f"#{rule_id}").get_by_role("button", name="Move rule 2 up").click()
    wait_until(page, f"document.querySelector('li.guideline').id === {rule_id!r}")
    first = guidelines_from_file()[0].text
    wait_until(
        page,
        f"(t => t.indexOf({new!r}) < t.indexOf({first!r}))"
        "(document.querySelector('#prompt-preview pre').textContent)",
    )

    # Deleting asks first, then the rule leaves the list and the preview.
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#{rule_id}").get_by_role("button", name="Delete").click()
    page.locator(f"#{rule_id}").wait_for(state="detached")
    wait_until(
        page,
        f"!document.querySelector('#prompt-preview pre').textContent.includes({new!r})",
    )
    assert page.context.page_errors == []


def test_non_admin_gets_403_on_the_page(live_app, live_server, page, person):
    email, password, _ = person
    log_in(page, live_server, email, password)
    response = page.goto(f"{live_server.url}/admin/guidelines")
    assert response.status == 403
    assert page.locator("#prompt-preview").count() == 0
