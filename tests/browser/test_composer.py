"""The composer as a person meets it: the keyboard alone from log-in to a second message,
a draft that survives reloads and other tabs, a send while the socket is down, and files
attached, removed and seen on the row they went with."""

from __future__ import annotations

import re

from app.workspace.models import Offer
from tests.browser.helpers import log_in, new_chat, wait_until
from tests.fake_model import Turn, text, tool_use

# Records every time focus comes to rest on <body>: it left an element, nothing took it
# within 100 ms (a swap may drop it for the few milliseconds before card.js or the
# composer puts it back).
FOCUS_WATCH = """
window.__bodyFocus = [];
let __moves = 0;
document.addEventListener("focusin", () => { __moves += 1; }, true);
document.addEventListener("focusout", (event) => {
  const from = event.target.id || event.target.className || event.target.tagName;
  const seen = __moves;
  setTimeout(() => {
    if (__moves === seen && document.activeElement === document.body) window.__bodyFocus.push(String(from));
  }, 100);
}, true);
"""


def _tab_to(page, selector: str, limit: int = 40) -> None:
    for _ in range(limit):
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def _focus_never_fell_to_body(page) -> None:
    assert page.evaluate("window.__bodyFocus") == []
    assert page.evaluate("document.activeElement !== document.body")


def test_keyboard_only_log_in_chat_answer_a_card_stop_and_send_again(
    page, live_server, person, fake_model, live_app
):
    with live_app.extensions["database"].session() as session:
        session.add(Offer(user_id=person[2], name="Calm Mornings Coaching", description="x"))
        session.commit()
    page.context.add_init_script(FOCUS_WATCH)
    console_errors = []  # CSP violations included: nothing a swap does may set a style
    page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
    page.goto(f"{live_server.url}/login")
    page.keyboard.type(person[0])  # the email field has focus
    page.keyboard.press("Tab")
    page.keyboard.type(person[1])
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/")

    # No chats yet: "+ New chat" opens a draft, whose box has focus.
    _tab_to(page, "a.new-chat")
    page.keyboard.press("Enter")
    page.wait_for_url("**/chats/new")
    wait_until(page, "document.activeElement.id === 'composer-input'")
    fake_model.script(
        Turn(text("Which offer?"), tool_use("select_offer", {"prompt": "Which offer is it for?"}))
    )
    page.keyboard.type("Make a quiz")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/chats/\d+$"))

    # The card takes focus when it appears; answer it with the keyboard.
    page.wait_for_selector(".card-q[data-status=awaiting]")
    wait_until(page, "document.activeElement.closest('.card-q')")
    fake_model.script(Turn(text("word " * 300), token_delay=0.03))
    page.keyboard.press("Space")
    _tab_to(page, ".card-q button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_selector("#live-text:has-text('word word')")
    _focus_never_fell_to_body(page)

    # Esc stops the reply; the box has focus and was typeable all along.
    page.keyboard.press("Escape")
    page.wait_for_selector("#composer:not(.busy)")
    page.wait_for_selector(".row-stopped")
    assert page.evaluate("document.activeElement.id") == "composer-input"

    fake_model.script(Turn(text("You're welcome."), token_delay=0.02))
    page.keyboard.type("Thanks")
    page.keyboard.press("Enter")
    page.wait_for_selector('.row-host:has-text("You\'re welcome.")')
    page.wait_for_selector(
        '#row-announcer:has-text("Loopdesk: You\'re welcome.")', state="attached"
    )
    page.wait_for_selector("#composer:not(.busy)")
    assert page.evaluate("document.activeElement.id") == "composer-input"
    assert page.input_value("#composer-input") == ""
    _focus_never_fell_to_body(page)
    assert console_errors == []


def test_a_draft_is_kept_across_a_reload_and_another_tabs_send(
    page, live_server, person, fake_model
):
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    page.click("#composer-input")
    page.keyboard.type("half a thought")
    page.reload()
    page.wait_for_selector("body[data-socket=open]", state="attached")
    assert page.input_value("#composer-input") == "half a thought"

    other = page.context.new_page()
    other.goto(f"{live_server.url}/chats/{chat_id}")
    other.wait_for_selector("body[data-socket=open]", state="attached")
    fake_model.script(Turn(text("Hello back from the model."), token_delay=0.02))
    other.fill("#composer-input", "Hello from the other tab")
    other.keyboard.press("Enter")
    # The other tab's send reaches this page (busy, a row, idle again): the draft stays.
    page.wait_for_selector(".row-host:has-text('Hello back from the model.')")
    page.wait_for_selector("#composer:not(.busy)")
    assert page.input_value("#composer-input") == "half a thought"
    assert other.input_value("#composer-input") == ""
    page.reload()
    assert page.input_value("#composer-input") == "half a thought"


def test_a_send_while_the_socket_is_down_says_not_sent_and_keeps_the_draft(
    page, live_server, person, fake_model
):
    sockets = []

    def through(ws):
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r".*/ws/chats/\d+"), through)
    posts = []
    page.on("request", lambda r: r.method == "POST" and "/messages" in r.url and posts.append(r))
    log_in(page, live_server)
    new_chat(page, live_server)
    # The deploy-style close (1012): htmx reconnects, here after a known wait.
    page.evaluate("htmx.config.wsReconnectDelay = () => 3000")
    sockets[-1].close(code=1012, reason="restarting")
    page.wait_for_selector("body[data-socket=closed]", state="attached")

    page.fill("#composer-input", "Are you there?")
    page.keyboard.press("Enter")
    page.wait_for_selector("#banner.banner-shown:has-text('Not sent')")
    assert page.input_value("#composer-input") == "Are you there?"
    assert posts == []
    box = page.locator("#composer").bounding_box()

    page.wait_for_selector("#toast:has-text('Connected again')")
    assert page.locator(".banner-shown").count() == 0  # the "not sent" went with it
    fake_model.script(Turn(text("Yes, here.")))
    page.keyboard.press("Enter")
    page.wait_for_selector(".row-host:has-text('Yes, here.')")
    assert page.locator("#composer").bounding_box() == box  # toasts never move it
    assert len(posts) == 1


def test_files_attached_one_removed_and_the_rest_shown_on_the_sent_row(
    page, live_server, person, fake_model
):
    log_in(page, live_server)
    new_chat(page, live_server)
    page.set_input_files(
        "#attach-input",
        [
            {"name": "brief.md", "mimeType": "text/markdown", "buffer": b"# Brief"},
            {"name": "wrong.txt", "mimeType": "text/plain", "buffer": b"not this one"},
        ],
    )
    page.wait_for_selector(".attachment-chip:has-text('wrong.txt')")
    # A drop adds to them.
    page.evaluate(
        """() => {
          const files = new DataTransfer();
          files.items.add(new File(["notes"], "notes.txt", { type: "text/plain" }));
          const area = document.getElementById("composer-area");
          area.dispatchEvent(new DragEvent("drop", { dataTransfer: files, bubbles: true, cancelable: true }));
        }"""
    )
    page.wait_for_selector(".attachment-chip:has-text('notes.txt')")
    page.click("button[aria-label='Remove wrong.txt']")
    page.wait_for_selector(".attachment-chip:has-text('wrong.txt')", state="detached")
    assert page.locator(".attachment-chip").count() == 2

    # A file that cannot be attached says so plainly.
    page.set_input_files(
        "#attach-input",
        [{"name": "tool.exe", "mimeType": "application/x-msdownload", "buffer": b"MZ"}],
    )
    page.wait_for_selector("#banner.banner-shown")
    banner = page.inner_text("#banner")
    assert "tool.exe" in banner and "multipart" not in banner and "images files" not in banner

    fake_model.script(Turn(text("Read them.")))
    page.fill("#composer-input", "Use these")
    page.keyboard.press("Enter")
    page.wait_for_selector(".row-host:has-text('Read them.')")
    assert page.locator(".attachment-chip").count() == 0
    assert page.locator(".banner-shown").count() == 0  # the send succeeded: the error went
    sent = page.locator("#m-1 .row-file").all_inner_texts()
    assert [name.splitlines()[0].strip() for name in sent] == ["brief.md", "notes.txt"]
    said = fake_model.requests[-1]["messages"][0]["content"]
    said = said if isinstance(said, str) else " ".join(b.get("text", "") for b in said)
    assert "brief.md" in said and "notes.txt" in said and "wrong.txt" not in said
    page.reload()
    assert page.locator("#m-1 .row-file").count() == 2


def test_a_new_chat_opens_empty_and_keeps_its_draft_across_a_reload(
    page, live_server, person, fake_model
):
    log_in(page, live_server)
    page.click("text=+ New chat")
    page.wait_for_url("**/chats/new")
    assert page.input_value("#composer-input") == ""
    page.click("#composer-input")
    page.keyboard.type("Plan my spring launch")
    page.reload()
    assert page.input_value("#composer-input") == "Plan my spring launch"

    fake_model.script(Turn(text("Happy to plan it.")))
    page.click("#composer-input")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/chats/\d+$"))
    page.wait_for_selector(".row-host:has-text('Happy to plan it.')")
    assert page.inner_text("#rows .row-user .row-body") == "Plan my spring launch"
    assert page.inner_text("#chat-title") == "Plan my spring launch"
    # Sent: the next new chat starts empty again.
    page.click("text=+ New chat")
    page.wait_for_url("**/chats/new")
    assert page.input_value("#composer-input") == ""


def test_a_dropped_socket_says_reconnecting_after_two_seconds_then_connected_again(
    page, live_server, person
):
    sockets = []

    def through(ws):
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r".*/ws/chats/\d+"), through)
    log_in(page, live_server)
    new_chat(page, live_server)
    state = page.locator("#connection-state")
    assert state.get_attribute("role") == "status"  # polite, never a dialog

    # A blip (back within two seconds) says nothing.
    page.evaluate("htmx.config.wsReconnectDelay = () => 200")
    sockets[-1].close(code=1012, reason="restarting")
    page.wait_for_selector("body[data-socket=closed]", state="attached")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    assert state.inner_text() == ""

    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.evaluate("htmx.config.wsReconnectDelay = () => 4000")
        closed_at = page.evaluate("Date.now()")
        sockets[-1].close(code=1006, reason="")
        page.wait_for_selector("#connection-state:has-text('Reconnecting…')")
        assert page.evaluate("Date.now()") - closed_at >= 1900
        assert state.is_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.wait_for_selector("#connection-state:has-text('Connected again')")
        assert state.is_visible()
        page.wait_for_selector("#connection-state", state="hidden")  # faded, then gone
    assert page.locator("dialog[open], [role=alertdialog]").count() == 0
