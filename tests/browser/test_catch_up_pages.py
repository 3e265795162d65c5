"""A reconnected page catches up a page of rows at a time: the server stops at
SOCKET_CATCH_UP_ROWS and marks it (#catch-up-more), and the page asks again from its last
row until it holds every row (static/app.js)."""

from __future__ import annotations

import pytest

from app.chat.conversations import create_conversation
from app.chat.rows import insert_message
from tests.browser.helpers import log_in, wait_until

ROWS = "#rows > article[data-sequence]"


@pytest.fixture
def live_app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, socket_catch_up_rows=2)


def test_a_reconnected_page_asks_for_every_page_of_missed_rows(live_server, live_app, person, page):
    _, _, user_id = person
    with live_app.extensions["database"].session() as session:
        chat = create_conversation(session, user_id, "Long chat")
        for n in range(1, 8):
            insert_message(
                session,
                chat.id,
                role="user",
                kind="user",
                content=f"row {n}",
                meta={"blocks": [{"type": "text", "text": f"row {n}"}]},
            )
        session.commit()
        chat_id = chat.id
    log_in(page, live_server)
    page.goto(f"{live_server.url}/chats/{chat_id}")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    # As if the page had missed rows 2 to 7 while it was away: drop them; then the
    # server drops the socket (1013, as when its queue overflowed), and htmx reconnects.
    page.evaluate(
        """() => {
          for (const row of document.querySelectorAll("#rows > article[data-sequence]")) {
            if (Number(row.dataset.sequence) > 1) row.remove();
          }
        }"""
    )
    # (the server's path when a socket's events were lost, e.g. its queue was full)
    for subscription in list(live_app.extensions["services"].hub._by_conversation[chat_id]):
        subscription.overflowed = True
    wait_until(page, f"document.querySelectorAll('{ROWS}').length === 7", timeout=20)
    sequences = page.evaluate(
        f"() => [...document.querySelectorAll('{ROWS}')].map((row) => Number(row.dataset.sequence))"
    )
    assert sequences == [1, 2, 3, 4, 5, 6, 7]
    assert not page.context.page_errors
