"""The composer follows the run's state as the server says it, whatever the page did or
heard last: a Stop that reaches the server after the run paused on its card, a frame that
arrives late, a card answer the server refuses (the card was answered in another tab)."""

from __future__ import annotations

import threading

from sqlalchemy import select

from app.chat.models import Run
from tests.browser.helpers import log_in, new_chat, send_message
from tests.fake_model import Turn, text, tool_use

OPTIONS = [{"label": "Red", "value": "red"}, {"label": "Blue", "value": "blue"}]
CARD = Turn(text("Which one?"), tool_use("ask_user", {"question": "Colour?", "options": OPTIONS}))


class HeldSocket:
    """The page's chat socket through Playwright: frames from the server pass on, except
    those `hold` picks, kept until `release` sends them on (late, in order)."""

    def __init__(self, page):
        self.page = page
        self.hold = lambda message: False
        self.held: list[str] = []
        self.to_page = None
        page.route_web_socket("**/ws/chats/*", self._route)

    def _route(self, ws):
        server = ws.connect_to_server()
        self.to_page = ws
        server.on_message(self._from_server)
        ws.on_message(lambda message: server.send(message))

    def _from_server(self, message):
        if isinstance(message, str) and self.hold(message):
            self.held.append(message)
        else:
            self.to_page.send(message)

    def release(self, needle: str) -> None:
        """Send the held frames on and wait until the page has handled those that
        contain `needle`."""
        held, self.held = self.held, []
        self.hold = lambda message: False
        expected = sum(needle in message for message in held)
        assert expected, "nothing was held"
        self.page.evaluate(
            """({ needle, expected }) => {
              window.lateFrames = new Promise((resolve) => {
                let seen = 0;
                document.addEventListener("htmx:wsAfterMessage", (event) => {
                  if (String(event.detail.message).includes(needle) && ++seen >= expected) {
                    resolve(seen);
                  }
                });
              });
            }""",
            {"needle": needle, "expected": expected},
        )
        for message in held:
            self.to_page.send(message)
        self.page.evaluate("() => window.lateFrames")


def _state(page) -> tuple[str | None, bool, int]:
    form = page.locator("#composer")
    return (
        form.get_attribute("data-state"),
        page.locator("#composer button.stop").count() > 0,
        int(form.get_attribute("data-version")),
    )


def test_esc_just_before_the_card_arrives_leaves_the_card_waiting_not_stop(
    page, live_server, person, fake_model, live_app
):
    release = threading.Event()
    calls = []

    def reply(_body):
        calls.append(1)
        if len(calls) == 1:
            release.wait(20)
            return CARD
        return Turn(text("Colours"))  # the title proposal, or anything after

    fake_model.responder = reply
    socket = HeldSocket(page)
    # The frame saying "answering" comes late, after the card: a stale frame.
    socket.hold = lambda message: 'data-state="answering"' in message
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    stops = []
    page.route("**/chats/*/stop", lambda route: stops.append(route))

    send_message(page, "Pick a colour for me")
    page.wait_for_selector("#composer.busy[data-state=answering]")
    fake_model.wait_for_requests(1)
    with page.expect_request("**/chats/*/stop"):
        page.keyboard.press("Escape")
    page.wait_for_selector("#composer[data-pending=stop] button.stop:has-text('Stopping…')")

    release.set()  # the reply with the card arrives; the stop is still on its way
    page.wait_for_selector(".card-q[data-status=awaiting]")
    page.wait_for_selector("#composer[data-state=card]:not([data-pending])")
    assert stops, "the stop was not held"
    with page.expect_response("**/chats/*/stop") as stopped:
        stops[0].continue_()
    assert 'data-state="card"' in stopped.value.text()  # nothing was left to stop
    socket.release('data-state="answering"')

    mode, has_stop, version = _state(page)
    assert (mode, has_stop) == ("card", False)
    assert page.locator("#composer.busy").count() == 0
    assert page.get_attribute("#composer-input", "placeholder").startswith("Answer the question")
    with live_app.extensions["database"].session() as session:
        run = session.scalars(select(Run).where(Run.conversation_id == chat_id)).one()
        assert run.status == "awaiting" and version == 2 * run.id + 1


def test_enter_on_a_card_answered_in_another_tab_shows_the_servers_state(
    page, live_server, person, fake_model, context
):
    release = threading.Event()
    calls = []

    def reply(body):
        calls.append(1)
        if len(calls) == 1:
            return CARD
        tools = [tool.get("name") for tool in body.get("tools") or []]
        if "submit_title" in tools:
            return Turn(tool_use("submit_title", {"title": "Colours"}))
        release.wait(20)
        return Turn(text("Blue it is."))

    fake_model.responder = reply
    socket = HeldSocket(page)
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    send_message(page, "Pick a colour for me")
    page.wait_for_selector(".card-q[data-status=awaiting]")
    page.wait_for_selector("#composer[data-state=card]")
    # From here this tab hears nothing from its socket: it still shows the card waiting.
    socket.hold = lambda message: True

    other = context.new_page()
    other.goto(f"{live_server.url}/chats/{chat_id}")
    other.check(".card-q input[type=radio] >> nth=1")
    with other.expect_response(f"**/chats/{chat_id}/cards/*") as answered:
        other.click(".card-q [data-card-submit]")
    assert answered.value.status == 200
    other.wait_for_selector("#composer.busy[data-state=answering]")

    page.focus(".card-q input[type=radio] >> nth=0")
    page.keyboard.press("Space")  # Red, then Enter on the card's button
    page.focus(".card-q [data-card-submit]")
    with page.expect_response(f"**/chats/{chat_id}/cards/*") as refused:
        page.keyboard.press("Enter")
    assert refused.value.status == 409
    # The answer did not take: the composer says what the server says, a run in flight.
    page.wait_for_selector("#composer.busy[data-state=answering] button.stop")
    page.wait_for_selector(".card-q:has-text('not waiting for an answer')")

    release.set()
    other.wait_for_selector(".row-host:has-text('Blue it is.')")
    other.wait_for_selector("#composer[data-state=idle]")
    socket.release('id="composer"')
    page.wait_for_selector(".row-host:has-text('Blue it is.')")
    mode, has_stop, _ = _state(page)
    assert (mode, has_stop) == ("idle", False)
    assert context.page_errors == []
