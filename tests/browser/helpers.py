"""What browser tests do on a page: log in, open a chat, send, wait, take a screenshot."""

from __future__ import annotations

import json
from pathlib import Path

from tests.factories import PASSWORD
from tests.waiting import eventually

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"


def log_in(page, live_server, email="ada@example.com", password=PASSWORD):
    page.goto(f"{live_server.url}/login")
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/**")


def new_chat(page, live_server) -> int:
    """An empty chat of the logged-in person, open with its socket connected. "+ New chat"
    opens a draft that has no chat (and no socket) until its first message, so the chat
    is made as a script would, with the page's session and CSRF token."""
    page.goto(f"{live_server.url}/chats/new")
    csrf = json.loads(page.get_attribute("body", "hx-headers"))["X-CSRFToken"]
    response = page.request.post(
        f"{live_server.url}/api/chats", data={}, headers={"X-CSRFToken": csrf}
    )
    assert response.status == 201, response.text()
    chat_id = response.json()["id"]
    page.goto(f"{live_server.url}/chats/{chat_id}")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    return chat_id


def send_message(page, message: str) -> None:
    """Type into the composer and press Enter, as a person sends."""
    page.fill("#composer-input", message)
    page.keyboard.press("Enter")


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


def wait_until(page, expression: str, timeout: float = 10.0) -> None:
    """Poll a JS expression. (Playwright's wait_for_function evaluates strings inside the
    page, which our Content-Security-Policy rightly forbids.)"""
    eventually(
        lambda: page.evaluate(f"() => Boolean({expression})"),
        timeout,
        f"waiting for {expression}",
        sleep=lambda seconds: page.wait_for_timeout(seconds * 1000),
    )


def audit(page) -> list[str]:
    """axe-core's serious and critical violations on the page as shown. axe is evaluated
    through the DevTools protocol, so the page's CSP stays on for the console check."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    return page.evaluate(
        """async () => {
          // Judge the page as it settles, not halfway through a fade (a row's time fades in
          // when its card takes focus): wait for the finite transitions under way.
          const fading = document.getAnimations().filter(
            (a) => a.effect && a.effect.getComputedTiming().endTime !== Infinity);
          await Promise.race([
            Promise.all(fading.map((a) => a.finished.catch(() => null))),
            new Promise((done) => setTimeout(done, 2000)),
          ]);
          const result = await axe.run(document, { resultTypes: ["violations"] });
          return result.violations
            .filter((v) => v.impact === "serious" || v.impact === "critical")
            .map((v) => `${v.id}: ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`);
        }"""
    )
