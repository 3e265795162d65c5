"""A page whose session ended in another tab (a log out here) says so at once, with a way
back in: its socket was closed with 1008 and nothing more would ever arrive."""

from __future__ import annotations

from tests.browser.helpers import log_in, new_chat


def test_logging_out_in_one_tab_tells_the_others_to_log_in_again(
    page, live_server, person, context
):
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    other = context.new_page()
    other.goto(f"{live_server.url}/settings")
    other.click("form[action='/logout'] button[type=submit]")
    other.wait_for_url(f"{live_server.url}/login**")

    banner = page.wait_for_selector("#banner.banner-shown")
    assert "Your session ended: log in again." in banner.inner_text()
    link = page.locator("#banner a.banner-link")
    assert link.inner_text() == "Log in"
    assert link.get_attribute("href") == f"/login?next=%2Fchats%2F{chat_id}"
    assert page.locator("#connection-state").inner_text() == ""  # no reconnecting: it would not
    link.click()
    page.wait_for_url(f"{live_server.url}/login?next=*")
