"""In Chromium: a scoped, expiring token made on the settings page, and "Log out
everywhere" ending another browser's session too."""

from __future__ import annotations

from app.memory.models import UserMemory
from tests.browser.helpers import log_in, screenshot

URL = "https://example.com/tips"


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


def test_adding_a_fact_and_a_token_sets_no_inline_style_and_the_token_can_be_copied(
    live_server, live_app, page, person
):
    console_errors: list[str] = []  # CSP violations included: no script may set a style
    page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    log_in(page, live_server)
    page.goto(f"{live_server.url}/settings")
    # What a browser or its password manager may do: a field given a style (through the
    # CSSOM, which the CSP allows). A swap must not copy it back as a style attribute.
    page.evaluate(
        "() => { for (const id of ['new-fact', 'token-name']) "
        "document.getElementById(id).style.outline = '2px solid orange'; }"
    )

    page.fill("#new-fact", "Runs a bakery in Leeds.")
    page.keyboard.press("Enter")
    page.wait_for_selector("#facts .fact-text:has-text('Runs a bakery in Leeds.')")
    page.fill("#token-name", "nightly report")
    # Each scope's checkbox sits on the line of its name.
    for scope in ("read", "chat"):
        box = page.locator(f"input[name=scope_{scope}]").bounding_box()
        name = page.evaluate(  # the first line of its name (the text after the box)
            "(scope) => { const box = document.querySelector(`input[name=scope_${scope}]`);"
            " const range = document.createRange(); range.selectNodeContents(box.nextSibling);"
            " return range.getClientRects()[0].toJSON(); }",
            scope,
        )
        assert box["y"] < name["bottom"] and name["top"] < box["y"] + box["height"], scope
    page.click("#tokens button[type=submit]")
    token = page.locator("#new-token").inner_text()

    # The new token's copy button is reachable by keyboard and copies it.
    page.evaluate(  # what is written to the clipboard (headless Chromium reads none back)
        "() => { window.copiedTexts = [];"
        " navigator.clipboard.writeText = async (text) => { window.copiedTexts.push(text); }; }"
    )
    page.focus("#token-name")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.dataset.copy") == "text"
    page.keyboard.press("Enter")
    page.wait_for_selector("#tokens .token-copy.copied")
    assert page.evaluate("() => window.copiedTexts") == [token]
    assert console_errors == []

    # A fact from untrusted content is badged in the memory history as in the facts list.
    with live_app.extensions["database"].session() as session:
        memory = session.get(UserMemory, person[2])
        memory.untrusted_facts = {"Runs a bakery in Leeds.": [{"tool": "fetch_url", "url": URL}]}
        session.commit()
    page.goto(f"{live_server.url}/settings")
    assert page.locator("#facts .badge-untrusted").count() == 1
    assert page.locator("#memory-history .badge-untrusted").count() == 1
