"""Every screen for every person: phone and desktop, light and dark, axe-core's audit, no
sideways scrolling, no console error (CSP violations included); the phone's menu and
drawer; the theme kept on the account; the README's screenshots.

One server, one fake model and one seeded account serve the whole module (each test gets
its own browser context): the pages are only read here, so nothing leaks between tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.accounts.models import User
from tests.browser.helpers import audit, log_in, screenshot, wait_until
from tests.fake_model import Turn, text, tool_use
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1280, "height": 800}}
SMALL_PHONE = {**PHONE, "viewport": {"width": 360, "height": 740}}
SCREENS = {"phone": PHONE, "desktop": DESKTOP, "small-phone": SMALL_PHONE}


def _mcp_servers(user_id: int) -> list:
    """An admin's server with a change waiting, one of Ada's own with a header, and an
    admin's that asks each person to sign in (Settings offers Ada its Sign in button)."""
    from app.mcp.models import McpServer

    tool = {
        "name": "get_current_time",
        "title": None,
        "description": "Now.",
        "input_schema": {"type": "object"},
        "read_only_hint": True,
    }
    return [
        McpServer(
            name="time",
            command="mcp-server-time --local-timezone UTC",
            tools=[tool],
            pending=[{**tool, "description": "Changed."}],
            read_only_approved=["get_current_time"],
            policy="never",
        ),
        McpServer(
            name="docs",
            owner_id=user_id,
            url="https://mcp.example.com/mcp",
            header_names=["Authorization"],
            tools=[tool],
        ),
        McpServer(name="crm", url="https://crm.example.com/mcp", sign_in=True, tools=[tool]),
    ]


def _organized_chats(user_id: int) -> list:
    """The sidebar in every group: a pinned chat, two in a folder, and an archived one
    (on the Archived page, and found by the search page with its "archived" badge)."""
    from app.chat.models import Conversation
    from app.db import utcnow

    return [
        Conversation(user_id=user_id, title="Launch plan", pinned_at=utcnow()),
        Conversation(user_id=user_id, title="Acme brief", folder="Clients"),
        Conversation(user_id=user_id, title="Acme follow-up", folder="Clients"),
        Conversation(user_id=user_id, title="Old quiz idea", archived_at=utcnow()),
    ]


@pytest.fixture(scope="module")
def site(module_site):
    """The shared server with Ada (an admin, so every page opens), her offer and persona, a
    saved output, and a chat whose card waits for her answer."""
    app, server, model = module_site
    from app.accounts.email_tokens import RESET, issue_email_token
    from app.accounts.service import create_user
    from app.workspace.models import Offer, Persona

    with app.extensions["database"].session() as session:
        user = create_user(session, "ada@example.com", "correct horse battery")
        user.is_admin = True
        # Starters, one written from a fetched website: its badge shows on the empty chat,
        # and on the row of the message sent from it (chat_with_card sends its words).
        user.starters = [
            {
                "title": "A quiz",
                "prompt": "Make a quiz for my coaching offer",
                "untrusted_sources": [{"tool": "onboarding_fetch", "url": "https://calm.example/"}],
            },
            {"title": "Three ads", "prompt": "Write three ads for my offer"},
        ]
        session.flush()
        offer = Offer(user_id=user.id, name="Calm Mornings Coaching", description="Coaching")
        session.add(offer)
        session.flush()
        session.add(Persona(user_id=user.id, offer_id=offer.id, name="Weekend Barista"))
        session.add_all(_mcp_servers(user.id))
        # A reset link's form, opened logged out (opening it uses nothing up).
        reset_token = issue_email_token(session, user, RESET)
        session.add_all(_organized_chats(user.id))
        session.commit()
        user_id = user.id
    return {
        "app": app,
        "server": server,
        "model": model,
        "user_id": user_id,
        "reset_token": reset_token,
    }


@pytest.fixture(scope="module")
def chat_with_card(site, browser):
    """A chat whose reply has a table, code and a question card still waiting."""
    model = site["model"]
    model.script(
        Turn(
            text(
                "Here is the plan.\n\n| Step | Owner |\n|---|---|\n| Draft | Ada |\n\n"
                "```python\nprint('a fairly long line of code that would run off a phone')\n```"
            ),
            tool_use("select_offer", {"prompt": "Which offer is the quiz for?"}),
        )
    )
    context = browser.new_context(**DESKTOP)
    page = context.new_page()
    log_in(page, site["server"])
    chat_id = _api_chat(page, site["server"])
    page.goto(f"{site['server'].url}/chats/{chat_id}")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    page.fill("#composer-input", "Make a quiz for my coaching offer")
    page.keyboard.press("Enter")
    page.wait_for_selector(".card-q[data-status=awaiting]")
    page.wait_for_selector("#composer:not(.busy)")
    page.wait_for_selector("#m-1-untrusted")  # the starter's words, with their source
    context.close()
    return chat_id


@pytest.fixture(scope="module")
def shared_path(site, chat_with_card) -> str:
    """The read-only page of the chat with the card (app/chat/shares.py)."""
    from app.chat.models import Conversation
    from app.chat.shares import create_share

    with site["app"].extensions["database"].session() as session:
        conversation = session.get(Conversation, chat_with_card)
        _share, raw = create_share(session, conversation, site["user_id"], None)
        session.commit()
    return f"/s/{raw}"


def _api_chat(page, server) -> int:
    page.goto(f"{server.url}/chats/new")
    csrf = json.loads(page.get_attribute("body", "hx-headers"))["X-CSRFToken"]
    response = page.request.post(f"{server.url}/api/chats", headers={"X-CSRFToken": csrf})
    assert response.status == 201
    return response.json()["id"]


def _pages(chat_id: int, user_id: int, shared: str) -> list[str]:
    return [
        f"/chats/{chat_id}",
        shared,
        "/chats/new",
        "/settings",
        "/search?q=quiz",
        "/chats/archived",
        "/api/docs",
        "/api/docs/websocket",
        "/workspace/offers",
        "/workspace/offers/new",
        "/workspace/personas",
        "/workspace/personas/new",
        "/workspace/outputs",
        "/workspace/assets",
        "/welcome",
        "/admin/users",
        f"/admin/users/{user_id}/memory",
        "/admin/guidelines",
        "/admin/runs",
        f"/admin/conversations/{chat_id}/runs",
        "/admin/usage",
        f"/admin/users/{user_id}/usage",
        "/admin/mcp-servers",
        "/verify/no-such-token",  # a confirmation link that no longer works
    ]


def _logged_out_pages(reset_token: str) -> list[str]:
    return ["/login", "/forgot", f"/reset/{reset_token}", "/reset/no-such-token"]


def _forgive_its_404(path: str, errors: list[str]) -> None:
    """A link that no longer works answers its page with 404, which the console reports."""
    if path.endswith("/no-such-token"):
        errors[:] = [error for error in errors if "404 (NOT FOUND)" not in error]


def _watch_console(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def _overflow(page, width: int) -> list[str]:
    """What makes the page wider than the screen (compared with the device's width: on a
    phone the layout viewport itself widens to fit wide content)."""
    return page.evaluate(
        """(width) => {
          const wide = [];
          const root = document.documentElement;
          if (root.scrollWidth > width) wide.push(`document ${root.scrollWidth}px`);
          for (const el of document.querySelectorAll(".chat-scroll, .chat-main, main")) {
            if (el.scrollWidth > el.clientWidth + 1) wide.push(`${el.className} ${el.scrollWidth}px`);
          }
          return wide;
        }""",
        width,
    )


def _ring_contrast(page, focused: str, behind: str) -> float:
    return page.evaluate(
        """([focused, behind]) => {
          const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
          const lum = ([r, g, b]) => [r, g, b]
            .map((v) => v / 255)
            .map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
            .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
          const ring = lum(rgb(getComputedStyle(document.querySelector(focused)).outlineColor));
          const ground = lum(rgb(getComputedStyle(document.querySelector(behind)).backgroundColor));
          return (Math.max(ring, ground) + 0.05) / (Math.min(ring, ground) + 0.05);
        }""",
        [focused, behind],
    )


@pytest.mark.parametrize(
    ("screen", "theme"),
    [
        ("phone", "light"),
        ("phone", "dark"),
        ("desktop", "light"),
        ("desktop", "dark"),
        ("small-phone", "light"),  # the narrowest width supported
    ],
)
def test_every_page_fits_the_screen_passes_axe_and_logs_no_error(
    site, chat_with_card, shared_path, browser, screen, theme
):
    server = site["server"]
    context = browser.new_context(color_scheme=theme, **SCREENS[screen])
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors = _watch_console(page)
    problems = {}
    for path in _logged_out_pages(site["reset_token"]):
        page.goto(f"{server.url}{path}")
        _forgive_its_404(path, errors)
        found = audit(page) + _overflow(page, SCREENS[screen]["viewport"]["width"])
        if found:
            problems[path] = found
    page.goto(f"{server.url}{shared_path}")  # a shared chat, logged out
    found = audit(page) + _overflow(page, SCREENS[screen]["viewport"]["width"])
    if found:
        problems["/s/<token> logged out"] = found
    log_in(page, server)
    for path in _pages(chat_with_card, site["user_id"], shared_path):
        page.goto(f"{server.url}{path}")
        _forgive_its_404(path, errors)
        if path.startswith("/chats/") and path not in ("/chats/new", "/chats/archived"):
            page.wait_for_selector("body[data-socket=open]", state="attached")
            page.wait_for_selector(".card-q[data-enhanced=true]", state="attached")
        if path == "/chats/new":
            assert page.is_visible("#starter-1-untrusted")
        found = audit(page) + _overflow(page, SCREENS[screen]["viewport"]["width"])
        if found:
            problems[path] = found
    # The README's pictures: the chat with its waiting card.
    page.goto(f"{server.url}/chats/{chat_with_card}")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    page.wait_for_selector(".card-q[data-enhanced=true]", state="attached")
    # The focus ring stands out from what it sits on: 3:1 or better (WCAG 2.2).
    page.focus("#composer-input")
    assert _ring_contrast(page, "#composer-input", "#composer-area") >= 3
    page.focus(".card-q button[type=submit]")
    assert _ring_contrast(page, ".card-q button[type=submit]", ".card-q") >= 3
    if screen == "desktop" or (screen, theme) == ("phone", "light"):
        name = "screen-phone" if screen == "phone" else f"screen-desktop-{theme}"
        shutil.copy(screenshot(page, name), DOCS / f"{name}.png")
    context.close()
    assert problems == {}
    assert errors == []


def test_on_a_phone_the_menu_and_the_chat_list_open_from_buttons(site, chat_with_card, browser):
    context = browser.new_context(**PHONE)
    page = context.new_page()
    log_in(page, site["server"])
    page.goto(f"{site['server'].url}/chats/{chat_with_card}")
    assert not page.is_visible("#topnav")
    assert not page.is_visible("#sidebar")
    page.click("#menu-button")
    page.wait_for_selector("#topnav a:has-text('Settings')")
    assert page.get_attribute("#menu-button", "aria-expanded") == "true"
    page.keyboard.press("Escape")
    assert not page.is_visible("#topnav")
    assert page.evaluate("document.activeElement.id") == "menu-button"

    page.click("[data-drawer-open]")
    page.wait_for_selector("#sidebar .conversation-item", state="visible")
    # Rename and Delete are there without hovering; every control is a 44 px target.
    item = f"#conv-{chat_with_card}"
    assert page.is_visible(f"{item} button:has-text('Rename')")
    assert page.is_visible(f"{item} button:has-text('Delete')")
    small = page.evaluate(
        """() => Array.from(document.querySelectorAll(
             '#sidebar a, #sidebar button, .topbar button, #composer button, .card-q button'))
           .filter((el) => el.offsetParent !== null)
           .map((el) => [el.textContent.trim() || el.getAttribute('aria-label'), el.getBoundingClientRect()])
           .filter(([, r]) => r.height < 44 || r.width < 44)
           .map(([name, r]) => `${name} ${Math.round(r.width)}x${Math.round(r.height)}`)"""
    )
    assert small == []
    page.keyboard.press("Escape")
    wait_until(page, "!document.body.classList.contains('drawer-open')")
    assert page.evaluate("document.activeElement.matches('[data-drawer-open]')")
    context.close()


def _stored_theme(site, wanted: str, timeout: float = 10.0) -> str:
    seen = []

    def stored():
        with site["app"].extensions["database"].session() as session:
            seen[:] = [session.get(User, site["user_id"]).theme]
        return seen[0] if seen[0] == wanted else None

    return eventually(stored, timeout, lambda: f"the stored theme stayed {seen[0]!r}")


def test_the_theme_toggle_is_kept_on_the_account(site, browser):
    server = site["server"]
    context = browser.new_context(color_scheme="light", **DESKTOP)
    page = context.new_page()
    log_in(page, server)
    page.goto(f"{server.url}/settings")
    assert page.evaluate("getComputedStyle(document.body).colorScheme") != "dark"
    light_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.click("#theme-toggle")
    wait_until(page, "document.documentElement.dataset.theme === 'dark'")
    assert page.get_attribute("#theme-toggle", "aria-pressed") == "true"
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") != light_bg
    # The toggle changes the page at once and posts in the background: wait for the post.
    assert _stored_theme(site, wanted="dark") == "dark"
    # Another browser (a light system) shows the person's choice.
    other = browser.new_context(color_scheme="light", **DESKTOP)
    other_page = other.new_page()
    log_in(other_page, server)
    assert other_page.get_attribute("html", "data-theme") == "dark"
    # Settings takes it back to following the system.
    other_page.goto(f"{server.url}/settings")
    other_page.check("#theme-settings input[value=system]")
    other_page.click("#theme-settings button[type=submit]")
    other_page.wait_for_url("**/settings")
    assert other_page.get_attribute("html", "data-theme") is None
    other.close()
    context.close()
