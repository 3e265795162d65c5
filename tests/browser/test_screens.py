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
        # Unread: its dot, and the list's "Unread" heading with its count.
        Conversation(user_id=user_id, title="Acme brief", folder="Clients", unread=True),
        Conversation(user_id=user_id, title="Acme follow-up", folder="Clients"),
        Conversation(user_id=user_id, title="Old quiz idea", archived_at=utcnow()),
    ]


def _shared_projects(session, user_id: int) -> int:
    """Ada's team with Bob, an editor, and an open invitation; and Bob's studio, which
    invites Ada (on her Projects page, with its Join button). Returns the team's id."""
    from datetime import timedelta

    from app.accounts.project_models import ProjectInvitation, ProjectMember
    from app.accounts.projects import create_project, token_digest
    from app.accounts.service import create_user
    from app.db import utcnow

    bob = create_user(session, "bob@example.com", "correct horse battery")
    team = create_project(session, user_id, "Launch team")
    studio = create_project(session, bob.id, "Bob's studio")
    week = utcnow() + timedelta(days=7)
    session.add_all(
        [
            ProjectMember(project_id=team.id, user_id=bob.id, role="editor"),
            ProjectInvitation(
                project_id=team.id,
                email="carol@example.com",
                role="viewer",
                token_digest=token_digest("screens-carol"),
                invited_by_id=user_id,
                expires_at=week,
            ),
            ProjectInvitation(
                project_id=studio.id,
                email="ada@example.com",
                role="editor",
                token_digest=token_digest("screens-ada"),
                invited_by_id=bob.id,
                expires_at=week,
            ),
        ]
    )
    return team.id


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
        queued_chat_id = _queued_chat(session, user.id)
        project_id = _shared_projects(session, user.id)
        retired_chat = _models_to_pick(session, user.id)
        session.commit()
        user_id = user.id
        leaver_id = _leaver(session)
    return {
        "app": app,
        "server": server,
        "model": model,
        "user_id": user_id,
        "leaver_id": leaver_id,
        "reset_token": reset_token,
        "project_id": project_id,
        "retired_chat": retired_chat,
        "queued_chat_id": queued_chat_id,
    }


def _models_to_pick(session, user_id: int) -> int:
    """Two models to pick (every chat's header shows the picker), and a chat whose pick is
    no longer offered (its header says so); its id."""
    from app.chat.models import Conversation
    from app.chat.offered_models import ModelSpec, add_model

    add_model(session, "claude-sonnet-5-5", ModelSpec("Sonnet"), 200_000)
    add_model(session, "claude-opus-5", ModelSpec("Opus", credits=7, thinking_budget=4096), 200_000)
    retired = Conversation(user_id=user_id, title="On a retired model", model="claude-retired")
    session.add(retired)
    session.flush()
    return retired.id


def _queued_chat(session, user_id: int) -> int:
    """A chat with two messages still queued after a Stop: the queue above the composer,
    each with "Send now" and × (app/chat/queue.py)."""
    from app.chat.models import Conversation, QueuedMessage

    chat = Conversation(user_id=user_id, title="Queued ideas")
    session.add(chat)
    session.flush()
    session.add_all(
        [
            QueuedMessage(conversation_id=chat.id, content="Now a headline for the landing page"),
            QueuedMessage(conversation_id=chat.id, content="And three subject lines"),
        ]
    )
    return chat.id


def _leaver(session) -> int:
    """Dan, whose deletion page (admin) lists a project passing to Erin and one going
    with him."""
    from app.accounts.projects import add_member, create_project
    from app.accounts.service import create_user

    dan = create_user(session, "dan@example.com", "correct horse battery")
    create_user(session, "erin@example.com", "correct horse battery")
    team = create_project(session, dan.id, "Spring launch")
    add_member(session, team.id, dan.id, "erin@example.com", "editor")
    create_project(session, dan.id, "Dan's drafts")
    session.commit()
    return dan.id


@pytest.fixture(scope="module")
def team_project(site) -> int:
    """A shared project of other people's (Ada, the admin, is not in it), with a long
    address and usage: its admin page, and its rows on /admin/projects and /admin/usage."""
    from app.accounts.project_models import ProjectMember
    from app.accounts.projects import create_project
    from app.accounts.service import create_user
    from app.billing.models import UsageEvent
    from app.billing.quota import month_of
    from app.chat.models import Conversation

    with site["app"].extensions["database"].session() as session:
        grace = create_user(
            session, "grace.hopper.of.the.longest.address@example.com", "correct horse battery"
        )
        hal = create_user(session, "hal@example.com", "correct horse battery")
        session.flush()
        project = create_project(session, grace.id, "Spring launch for the bakery")
        session.add(ProjectMember(project_id=project.id, user_id=hal.id, role="editor"))
        chat = Conversation(user_id=hal.id, project_id=project.id, title="Posters for the launch")
        session.add(chat)
        session.flush()
        session.add(  # a reply of Hal's there: the usage pages' project rows
            UsageEvent(
                idempotency_key=f"{chat.id}:chat:0",
                user_id=hal.id,
                conversation_id=chat.id,
                project_id=project.id,
                model="claude-sonnet-5-5",
                credits=3,
                month=month_of(),
            )
        )
        session.commit()
        return project.id


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
def preset_paths(site) -> list[str]:
    """Ada's preset with starters and one for everyone with a long name: the new chat from
    hers, an empty chat started from it (its starters), the presets' pages and an open
    editing form."""
    from app.chat.models import Conversation
    from app.chat.preset_models import Preset

    with site["app"].extensions["database"].session() as session:
        own = Preset(
            user_id=site["user_id"],
            name="Launch posts",
            instructions="Short and warm, for people who coach.",
            tool_groups=["workspace", "writing"],
            starters=["Draft three posts for the launch of my coaching offer", "A teaser"],
        )
        session.add_all([own, Preset(name="Team voice for every launch and every campaign")])
        session.flush()
        chat = Conversation(user_id=site["user_id"], title="From a preset", preset_id=own.id)
        session.add(chat)
        session.commit()
        return [
            f"/chats/new?preset={own.id}",
            f"/chats/{chat.id}",
            "/settings/presets",
            f"/settings/presets/{own.id}/edit",
            "/admin/presets",
        ]


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


@pytest.fixture(scope="module")
def rated_chat(site) -> int:
    """A chat whose answer Ada rated down with a comment (the row's feedback open), run by
    a run that cost 3 credits (the header's gauge says so)."""
    from app.billing.models import UsageEvent
    from app.billing.quota import month_of
    from app.chat.feedback import DOWN, give_feedback
    from app.chat.models import Conversation, Run
    from app.chat.rows import insert_message

    with site["app"].extensions["database"].session() as session:
        chat = Conversation(user_id=site["user_id"], title="A rated answer")
        session.add(chat)
        session.flush()
        run = Run(conversation_id=chat.id, user_id=site["user_id"], status="completed")
        session.add(run)
        session.flush()
        insert_message(session, chat.id, role="user", kind="user", content="Three taglines?")
        answer = "1. Calm mornings.\n2. Slow coffee.\n3. Quiet wins."
        insert_message(session, chat.id, role="assistant", kind="host", content=answer)
        comment = "Too short: I wanted one for each persona."
        give_feedback(session, chat.id, 2, site["user_id"], DOWN, comment)
        session.add(
            UsageEvent(
                idempotency_key=f"{chat.id}:chat:0",
                user_id=site["user_id"],
                conversation_id=chat.id,
                run_id=run.id,
                model="claude-sonnet-5-5",
                credits=3,
                month=month_of(),
            )
        )
        session.commit()
        return chat.id


def _api_chat(page, server) -> int:
    page.goto(f"{server.url}/chats/new")
    csrf = json.loads(page.get_attribute("body", "hx-headers"))["X-CSRFToken"]
    response = page.request.post(f"{server.url}/api/chats", headers={"X-CSRFToken": csrf})
    assert response.status == 201
    return response.json()["id"]


def _pages(chat_id: int, user_id: int, shared: str, project_id: int) -> list[str]:
    return [
        f"/chats/{chat_id}",
        shared,
        "/chats/new",
        "/settings",
        "/settings/projects",
        f"/settings/projects/{project_id}",
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
        "/admin/projects",
        f"/admin/projects/{project_id}",
        f"/admin/projects/{project_id}/delete",
        f"/admin/users/{user_id}/memory",
        "/admin/guidelines",
        "/admin/runs",
        f"/admin/conversations/{chat_id}/runs",
        "/admin/usage",
        f"/admin/users/{user_id}/usage",
        "/admin/mcp-servers",
        "/admin/models",
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
    site,
    chat_with_card,
    shared_path,
    team_project,
    rated_chat,
    preset_paths,
    browser,
    screen,
    theme,
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
    deletion = f"/admin/users/{site['leaver_id']}/delete"
    pages = _pages(chat_with_card, site["user_id"], shared_path, site["project_id"])
    # A rated answer with its comment, the gauge, the run logs' feedback filtered, and a
    # chat with a queue.
    rated = f"/chats/{rated_chat}"
    feedback = ["/admin/runs?rating=down&commented=1", rated]
    queued = f"/chats/{site['queued_chat_id']}"
    for path in [*pages, deletion, f"/admin/projects/{team_project}", *feedback, queued]:
        page.goto(f"{server.url}{path}")
        _forgive_its_404(path, errors)
        if path == rated:
            page.wait_for_selector("body[data-socket=open]", state="attached")
            assert page.is_visible("#m-2-feedback .feedback-comment")
            assert page.is_visible("#context-gauge meter")
        elif path == queued:
            page.wait_for_selector("#queue .queue-item")
        elif path.startswith("/chats/") and path not in ("/chats/new", "/chats/archived"):
            page.wait_for_selector("body[data-socket=open]", state="attached")
            page.wait_for_selector(".card-q[data-enhanced=true]", state="attached")
        if path == "/chats/new":
            assert page.is_visible("#starter-1-untrusted")
        if path == "/admin/models":  # the model server's list, asked for once it loaded
            page.wait_for_selector("#server-models-note", state="attached")
        found = audit(page) + _overflow(page, SCREENS[screen]["viewport"]["width"])
        if found:
            problems[path] = found
    # A chat whose model is no longer offered: the header's picker says so.
    page.goto(f"{server.url}/chats/{site['retired_chat']}")
    page.wait_for_selector("#model-notice")
    found = audit(page) + _overflow(page, SCREENS[screen]["viewport"]["width"])
    if found:
        problems["/chats/<retired model>"] = found
    for path in preset_paths:  # a chat from a preset is empty: its starters, no card
        page.goto(f"{server.url}{path}")
        page.wait_for_selector("#chat-preset, #presets", state="attached")
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


@pytest.fixture(scope="module")
def scheduled_chat(site) -> int:
    """A chat of Ada's with two scheduled messages: one live, one paused whose last tick
    was not sent (the Schedule panel's every state)."""
    from datetime import timedelta

    from app.chat.models import Conversation
    from app.chat.schedule_models import ChatSchedule
    from app.db import utcnow

    with site["app"].extensions["database"].session() as session:
        chat = Conversation(user_id=site["user_id"], title="Morning digest")
        session.add(chat)
        session.flush()
        soon = utcnow() + timedelta(days=1)
        session.add_all(
            [
                ChatSchedule(
                    conversation_id=chat.id,
                    user_id=site["user_id"],
                    cron="0 9 * * 1-5",
                    timezone="America/Argentina/Buenos_Aires",
                    message="What changed overnight in our campaigns? " * 3,
                    next_run_at=soon,
                ),
                ChatSchedule(
                    conversation_id=chat.id,
                    user_id=site["user_id"],
                    cron="*/15 8-18 1-7 * 1",
                    timezone="UTC",
                    message="Check the first Monday's numbers",
                    paused=True,
                    next_run_at=soon,
                    last_error="This month's credit allowance is used up.",
                ),
            ]
        )
        session.commit()
        return chat.id


@pytest.mark.parametrize(
    ("screen", "theme"),
    [("phone", "light"), ("phone", "dark"), ("desktop", "light"), ("desktop", "dark")],
)
def test_the_schedule_panel_fits_and_passes_axe(site, scheduled_chat, browser, screen, theme):
    server = site["server"]
    context = browser.new_context(color_scheme=theme, **SCREENS[screen])
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors = _watch_console(page)
    log_in(page, server)
    page.goto(f"{server.url}/chats/{scheduled_chat}")
    page.click("#schedule-menu > summary")
    page.wait_for_selector("#schedule-panel .schedule-item", state="visible")
    problems = {"listed": audit(page) + _overflow(page, SCREENS[screen]["viewport"]["width"])}
    page.fill("#schedule-when", "whenever")
    page.fill("#schedule-message", "Hello")
    page.click("#schedule-panel .schedule-add button[type=submit]")
    page.wait_for_selector("#schedule-error")
    # The refusal is a 400 (the browser and htmx both log it): expected here.
    errors[:] = [error for error in errors if "400" not in error]
    problems["refused"] = audit(page) + _overflow(page, SCREENS[screen]["viewport"]["width"])
    context.close()
    assert problems == {"listed": [], "refused": []}
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
