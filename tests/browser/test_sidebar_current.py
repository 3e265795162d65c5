"""The open chat stays marked in the sidebar (`.current`, `aria-current="page"`) whatever
re-renders its list item: the socket's live updates (a streamed reply's status, the
proposed title) and a rename, saved or cancelled, in the same tab."""

from __future__ import annotations

import pytest

from tests.browser.helpers import log_in, new_chat, wait_until
from tests.fake_model import Turn, text, tool_use


@pytest.fixture
def live_app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, chat_titles=True)


def _shows_current(page, chat_id: int) -> None:
    """Only this chat's item is current, its link the page's (once htmx has settled the
    swap: it restores the new element's classes a moment after inserting it)."""
    wait_until(
        page,
        f"""(() => {{
          const current = document.querySelectorAll(".conversation-item.current");
          const item = document.getElementById("conv-{chat_id}");
          return current.length === 1 && current[0] === item
            && !item.classList.contains("htmx-settling")
            && item.querySelector("a")?.getAttribute("aria-current") === "page"
            && document.querySelectorAll("#conversation-list [aria-current]").length === 1;
        }})()""",
        timeout=3,
    )


def _mark_item(page, chat_id: int) -> None:
    """Tag the element shown now, to see when a re-render replaced it."""
    page.evaluate(f"() => {{ document.getElementById('conv-{chat_id}').dataset.old = '1'; }}")


def _item_replaced(chat_id: int) -> str:
    return f"!document.getElementById('conv-{chat_id}').dataset.old"


def _title(chat_id: int, title: str) -> str:
    return f"document.querySelector('#conv-{chat_id} .title')?.textContent.trim() === {title!r}"


def test_the_open_chat_stays_current_through_live_updates_and_renames(
    page, live_server, person, fake_model
):
    fake_model.script(
        Turn(text("Here are three spring launch ideas."), token_delay=0.02),
        Turn(tool_use("submit_title", {"title": "Spring launch ideas"}), delay_first=0.5),
    )
    log_in(page, live_server)
    other_chat = new_chat(page, live_server)
    chat_id = new_chat(page, live_server)
    _shows_current(page, chat_id)

    # A streamed reply: the socket re-renders the item (streaming, idle, the proposed title).
    _mark_item(page, chat_id)
    page.fill("#composer-input", "Give me launch ideas for spring")
    page.keyboard.press("Enter")
    page.wait_for_selector("#m-2:has-text('three spring launch ideas')")
    wait_until(page, _title(chat_id, "Spring launch ideas"))
    page.wait_for_selector(f"#conv-{chat_id} .status-idle", state="attached")
    wait_until(page, _item_replaced(chat_id))
    _shows_current(page, chat_id)

    # A rename, saved in this tab: the htmx answer and the socket's frame both re-render it.
    page.hover(f"#conv-{chat_id}")
    page.click(f"#conv-{chat_id} button:has-text('Rename')")
    page.fill(f"#title-{chat_id}", "Our spring plan")
    page.click(f"#conv-{chat_id} button:has-text('Save')")
    wait_until(page, _title(chat_id, "Our spring plan"))
    page.wait_for_timeout(300)  # the socket's copy of the item comes after the answer
    wait_until(page, _title(chat_id, "Our spring plan"))
    _shows_current(page, chat_id)

    # A rename cancelled: the item comes back as it was, still current.
    page.hover(f"#conv-{chat_id}")
    page.click(f"#conv-{chat_id} button:has-text('Rename')")
    page.click(f"#conv-{chat_id} button:has-text('Cancel')")
    page.wait_for_selector(f"#conv-{chat_id} a")
    _shows_current(page, chat_id)
    assert not page.locator(f"#conv-{other_chat}.current").count()
