"""Deleting a chat as a person meets it: the tab that deletes it goes to another chat (its
address too); every other tab drops it from the list, and one showing it says it was
deleted, with a way on, instead of the chat (the socket's `conversationDeleted`)."""

from __future__ import annotations

import json
import re

from tests.browser.helpers import log_in, wait_until


def _make_chat(page, live_server, title: str) -> int:
    csrf = json.loads(page.get_attribute("body", "hx-headers"))["X-CSRFToken"]
    response = page.request.post(
        f"{live_server.url}/api/chats", data={"title": title}, headers={"X-CSRFToken": csrf}
    )
    assert response.status == 201, response.text()
    return response.json()["id"]


def _open(tab, live_server, chat_id: int) -> None:
    tab.goto(f"{live_server.url}/chats/{chat_id}")
    tab.wait_for_selector("body[data-socket=open]", state="attached")


def test_deleting_a_chat_moves_this_tab_on_and_tells_the_others(page, live_server, person, context):
    log_in(page, live_server)
    kept = _make_chat(page, live_server, "Keep me")
    doomed = _make_chat(page, live_server, "Delete me")
    _open(page, live_server, doomed)
    showing = context.new_page()  # another tab on the same chat
    _open(showing, live_server, doomed)
    elsewhere = context.new_page()  # and one on the other chat
    _open(elsewhere, live_server, kept)
    showing.click("#composer-input")
    showing.keyboard.type("half a thought")

    page.on("dialog", lambda dialog: dialog.accept())
    page.hover(f"#conv-{doomed}")
    page.click(f"#conv-{doomed} button:has-text('Delete')")
    # This tab: the chat shown now, and its address.
    page.wait_for_url(f"{live_server.url}/chats/{kept}")
    assert page.locator(f"#conv-{doomed}").count() == 0

    # The other tab showing it says so, instead of the chat.
    notice = showing.locator("#chat-deleted")
    notice.get_by_text("This chat was deleted").wait_for()
    assert showing.locator("#composer-input").is_hidden()
    assert showing.locator("#rows").is_hidden()
    assert showing.locator(f"#conv-{doomed}").count() == 0
    wait_until(showing, "document.title === 'Deleted chat · Loopdesk'")
    assert showing.evaluate("document.activeElement.id") == "chat-deleted-title"
    assert notice.get_by_role("link", name="Start a new chat").get_attribute("href") == (
        "/chats/new"
    )
    assert notice.get_by_role("link", name="Go to your chats").get_attribute("href") == "/"
    # The page closed its socket for good: no "Reconnecting…" follows.
    showing.wait_for_selector("#chat", state="detached")
    assert showing.locator("#connection-state").inner_text() == ""
    # The tab on another chat drops it from the list, and stays where it is.
    elsewhere.wait_for_selector(f"#conv-{doomed}", state="detached")
    assert elsewhere.locator("#composer-input").is_visible()

    for width, height in ((1280, 800), (390, 844)):
        showing.set_viewport_size({"width": width, "height": height})
        assert notice.is_visible()
        assert showing.evaluate("document.documentElement.scrollWidth") <= width
        box = notice.get_by_role("link", name="Start a new chat").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
    notice.get_by_role("link", name="Start a new chat").click()
    showing.wait_for_url(f"{live_server.url}/chats/new")
    assert context.page_errors == []


def test_a_tab_offline_when_its_chat_was_deleted_says_so_once_back(page, live_server, person):
    """Its socket was down when the frame went out; its reconnect is refused, and the page
    asks for the chat (404) instead of trying again and again."""
    sockets = []

    def through(ws):
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r".*/ws/chats/\d+"), through)
    log_in(page, live_server)
    doomed = _make_chat(page, live_server, "Delete me offline")
    _open(page, live_server, doomed)
    page.evaluate("htmx.config.wsReconnectDelay = () => 1500")
    sockets[-1].close(code=1006, reason="")
    page.wait_for_selector("body[data-socket=closed]", state="attached")
    csrf = json.loads(page.get_attribute("body", "hx-headers"))["X-CSRFToken"]
    deleted = page.request.post(  # as the list's Delete posts it, from the server's view
        f"{live_server.url}/chats/{doomed}/delete",
        headers={"X-CSRFToken": csrf},
        max_redirects=0,
    )
    assert deleted.status in (200, 302, 303), deleted.text()

    page.locator("#chat-deleted").get_by_text("This chat was deleted").wait_for(timeout=15_000)
    assert page.locator(f"#conv-{doomed}").count() == 0
    assert page.locator("#composer-input").is_hidden()
