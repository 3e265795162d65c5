"""In Chromium: a scoped, expiring token made on the settings page, and "Log out
everywhere" ending another browser's session too."""

from __future__ import annotations

from tests.browser.helpers import log_in, screenshot


def test_settings_make_a_scoped_token_and_log_out_everywhere(live_server, page, browser, person):
    log_in(page, live_server)
    other = browser.new_context()
    other.add_cookies(page.context.cookies())  # a second browser with the same session
    other_page = other.new_page()
    other_page.goto(f"{live_server.url}/settings")
    assert other_page.url.endswith("/settings")

    page.goto(f"{live_server.url}/settings")
    page.fill("#token-name", "nightly report")
    page.uncheck("input[name=scope_chat]")
    page.select_option("#token-expires", "30")
    page.click("#tokens button[type=submit]")
    page.locator("#new-token").wait_for()
    row = page.locator("#tokens tbody tr").first
    assert "nightly report" in row.inner_text()
    assert row.locator(".token-scope-list").inner_text() == "read"
    expires = row.locator("td").nth(4).inner_text()  # name, prefix, scopes, created, expires
    assert expires != "never" and expires[:2] == "20"
    screenshot(page, "settings-tokens")

    page.click("#sessions button[type=submit]")
    page.wait_for_url(f"{live_server.url}/login")
    assert "logged out everywhere" in page.content()
    other_page.goto(f"{live_server.url}/settings")
    assert "/login" in other_page.url
    other.close()
