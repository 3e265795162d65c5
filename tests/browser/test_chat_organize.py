"""Pins, folders and the archive as a person meets them: by keyboard alone, a chat is
pinned and archived from its list item; another tab's list regroups itself; Move files a
chat in a new folder; Select archives chats behind a confirmation; the Archived page
restores one. The sidebar is audited (axe) in its states: Move open, Select on."""

from __future__ import annotations

import json

from app.chat.models import Conversation
from tests.browser.helpers import audit, log_in, wait_until
from tests.waiting import eventually


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


def _stored(live_app, chat_id: int, check) -> None:
    def read():
        with live_app.extensions["database"].session() as session:
            return check(session.get(Conversation, chat_id)) or None

    eventually(read, 10, f"chat {chat_id} as expected")


def _focused(page) -> str:
    return page.evaluate(
        "document.activeElement.getAttribute('aria-label') || document.activeElement.textContent"
    )


def _settled(page) -> None:
    """htmx is done with the last swap (the new list's controls answer clicks)."""
    wait_until(page, "!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')")


def _press_until(page, label: str, limit: int = 80) -> None:
    """Tab forward until the control named `label` has the focus."""
    for _ in range(limit):
        if _focused(page).strip() == label:
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {label!r} (last: {_focused(page)!r})")


def test_pin_and_archive_by_keyboard_alone(page, live_server, live_app, person, context):
    log_in(page, live_server)
    other = _make_chat(page, live_server, "Other chat")
    chat = _make_chat(page, live_server, "Launch plan")
    _open(page, live_server, other)
    watching = context.new_page()  # another tab: its list follows
    _open(watching, live_server, other)

    page.focus(f"#conv-{chat} a")  # the chat's entry in the list, then the keyboard only
    _press_until(page, "Pin Launch plan")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"ul[data-group=pinned] #conv-{chat}")
    _stored(live_app, chat, lambda c: c.pinned_at is not None)
    # The focus stays on the item's toggle, now Unpin.
    wait_until(page, "document.activeElement.textContent.trim() === 'Unpin'")
    # The other tab's list regroups (the socket's item, then the list fetched again).
    watching.wait_for_selector(f"ul[data-group=pinned] #conv-{chat}")

    _press_until(page, "Archive Launch plan")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"#conv-{chat}", state="detached")
    _stored(live_app, chat, lambda c: c.archived_at is not None)
    assert page.locator("#conversation-list").get_by_text("Archived chats (1)").is_visible()
    watching.wait_for_selector(f"#conv-{chat}", state="detached")
    assert context.page_errors == []


def test_move_select_and_restore(page, live_server, live_app, person):
    log_in(page, live_server)
    first = _make_chat(page, live_server, "Acme brief")
    second = _make_chat(page, live_server, "Acme follow-up")
    third = _make_chat(page, live_server, "Loose ends")
    _open(page, live_server, third)

    # Move: a new folder's name; the chat goes into its folding group.
    page.hover(f"#conv-{first}")
    page.click(f"#conv-{first} button:has-text('Move')")
    page.wait_for_selector(f"#new-folder-{first}")
    assert audit(page) == []
    page.fill(f"#new-folder-{first}", "Clients")
    page.click(f"#conv-{first} button:has-text('Move')")
    page.wait_for_selector(
        f"details.folder-group ul[data-group^='folder:'][data-group$=':Clients'] #conv-{first}"
    )
    _settled(page)
    # The next Move offers the folder that now exists.
    # (Dispatched: the socket's news of the first move may shift the list under a pointer.)
    page.locator(f"#conv-{second} button:has-text('Move')").dispatch_event("click")
    page.wait_for_selector(f"#new-folder-{second}")
    page.check(f"#conv-{second} input[type=radio][value=Clients]")
    page.click(f"#conv-{second} button:has-text('Move')")
    page.wait_for_selector(f"ul[data-group^='folder:'][data-group$=':Clients'] #conv-{second}")
    _settled(page)
    # The folder folds away, and opens again.
    page.click("details.folder-group > summary")
    assert not page.is_visible(f"#conv-{first}")
    page.click("details.folder-group > summary")

    # Select: checkboxes, then "Archive selected" asks first.
    assert not page.is_visible(f"#conv-{first} .select-box")
    page.click("[data-select-toggle]")
    assert page.get_attribute("[data-select-toggle]", "aria-pressed") == "true"
    assert audit(page) == []
    page.check(f"#conv-{first} .select-box")
    page.check(f"#conv-{second} .select-box")
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("button:has-text('Archive selected')")
    wait_until(page, "true")
    assert asked == ["Archive the selected chats?"]
    _stored(live_app, first, lambda c: c.archived_at is None)  # declined: nothing changed
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button:has-text('Archive selected')")
    page.wait_for_selector(f"#conv-{first}", state="detached")
    page.wait_for_selector(f"#conv-{second}", state="detached")

    # The Archived page lists them; Restore puts one back.
    page.click("text=Archived chats (2)")
    page.wait_for_selector(f"#archived-{first}")
    page.click(f"#archived-{first} button:has-text('Restore')")
    page.wait_for_selector(f"#archived-{first}", state="detached")
    _stored(live_app, first, lambda c: c.archived_at is None and c.folder == "Clients")
    assert page.is_visible(f"#archived-{second}")


def test_a_person_in_two_projects_sees_each_projects_folders(page, live_server, person):
    """Folders belong to a project: the same name in two is two groups, each naming its
    project, and Move offers the chat's own project's folders."""
    log_in(page, live_server)
    csrf = {"X-CSRFToken": json.loads(page.get_attribute("body", "hx-headers"))["X-CSRFToken"]}
    team = page.request.post(
        f"{live_server.url}/api/projects", data={"name": "Launch team"}, headers=csrf
    ).json()["id"]
    home = _make_chat(page, live_server, "Notes")
    team_chat = page.request.post(
        f"{live_server.url}/api/chats", data={"title": "Brief", "project_id": team}, headers=csrf
    ).json()["id"]
    loose = _make_chat(page, live_server, "Loose ends")
    for chat, folder in ((home, "Drafts"), (team_chat, "Drafts")):
        response = page.request.patch(
            f"{live_server.url}/api/chats/{chat}", data={"folder": folder}, headers=csrf
        )
        assert response.status == 200, response.text()
    _open(page, live_server, loose)

    groups = page.locator("details.folder-group > summary")
    assert groups.all_inner_texts() == ["Drafts in Launch team (1)", "Drafts in Personal (1)"]
    page.wait_for_selector(f"ul[data-group='folder:{team}:Drafts'] #conv-{team_chat}")
    page.hover(f"#conv-{loose}")
    page.click(f"#conv-{loose} button:has-text('Move')")
    page.wait_for_selector(f"#new-folder-{loose}")
    assert page.locator(f"#conv-{loose} input[type=radio]").count() == 2  # Drafts, No folder
    assert audit(page) == []
