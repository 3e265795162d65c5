"""Search in a real browser: typing in the box above the conversation list shows hits as
you type, and a hit opens its chat scrolled to the row, marked and focused."""

from __future__ import annotations

from app.chat.conversations import create_conversation
from app.chat.rows import insert_message
from tests.browser.helpers import log_in, wait_until


def _long_chat(live_app, user_id: int, title: str, needle_at: int, rows: int = 60) -> int:
    with live_app.extensions["database"].session() as session:
        chat = create_conversation(session, user_id, title)
        for sequence in range(1, rows + 1):
            words = "the pistachio tagline we agreed on" if sequence == needle_at else "filler"
            insert_message(
                session,
                chat.id,
                role="user" if sequence % 2 else "assistant",
                kind="user" if sequence % 2 else "host",
                content=f"Message {sequence}: {words}. " + "More words here. " * 8,
            )
        session.commit()
        return chat.id


def test_typing_a_word_finds_the_row_and_opens_the_chat_there(page, live_server, live_app, person):
    _, _, user_id = person
    target = _long_chat(live_app, user_id, "Gelato launch", needle_at=7)
    _long_chat(live_app, user_id, "Other chat", needle_at=0)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/chats/{target}")

    page.fill("#chat-search-input", "pistach")
    hit = page.locator("#search-results .search-hit a")
    hit.first.wait_for()
    assert hit.count() == 1
    assert page.inner_text("#search-results mark").lower() == "pistachio"
    assert "Gelato launch" in page.inner_text("#search-results .search-chat")  # above its rows

    page.focus("#chat-search-input")
    page.keyboard.press("Tab")  # to the hit, as a keyboard user would
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/chats/{target}#m-7")
    page.wait_for_selector("#m-7.row-found")
    wait_until(page, "document.activeElement && document.activeElement.id === 'm-7'")
    page.wait_for_timeout(500)  # past the second reveal, after the socket's catch-up
    box = page.evaluate(
        "(() => { const r = document.getElementById('m-7').getBoundingClientRect();"
        " const c = document.getElementById('chat').getBoundingClientRect();"
        " return r.top >= c.top - 1 && r.top < c.bottom; })()"
    )
    assert box, "the found row is not in view"

    page.fill("#chat-search-input", "nothing-like-this")
    page.wait_for_selector("#search-results .search-empty")
    assert page.context.page_errors == []
