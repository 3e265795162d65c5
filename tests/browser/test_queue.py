"""Queue and Steer in the composer, and unread chats with their notification (static/
queue.js, templates/chat/_queue.html)."""

from __future__ import annotations

from tests.browser.helpers import log_in, new_chat, send_message, wait_until
from tests.fake_model import Turn, text

WORDS = " ".join(f"w{n}" for n in range(200))


def test_enter_queues_while_answering_and_the_queue_sends_it_next(
    page, live_server, person, fake_model, context
):
    fake_model.script(Turn(text(WORDS), token_delay=0.03), "The headline: Calm mornings.")
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Talk for a long time")
    page.wait_for_selector("#live-text:has-text('w5 ')")
    page.wait_for_selector("#composer [data-send=queue]")

    send_message(page, "Then a headline")  # Enter while busy: Queue

    page.wait_for_selector("#queue .queue-item:has-text('Then a headline')")
    wait_until(page, "document.getElementById('composer-input').value === ''")  # sent
    assert page.inner_text("#queue .queue-state") == "queued"
    # The reply ends; the queued message runs next and leaves the queue.
    page.wait_for_selector(".row:has-text('The headline: Calm mornings.')", timeout=30_000)
    page.wait_for_selector("#queue .queue-item", state="detached")
    assert context.page_errors == []


def test_steer_stops_the_reply_keeping_its_text_and_sends_now(
    page, live_server, person, fake_model, context
):
    fake_model.script(Turn(text(WORDS), token_delay=0.04), "Shorter: w0.")
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Talk for a long time")
    page.wait_for_selector("#live-text:has-text('w10 ')")
    page.fill("#composer-input", "Shorter please")

    page.click("#composer [data-send=steer]")

    page.wait_for_selector("#m-2 .row-stopped:has-text('Stopped')")
    page.wait_for_selector("#m-3:has-text('Shorter please')")
    page.wait_for_selector(".row:has-text('Shorter: w0.')", timeout=20_000)
    assert page.inner_text("#m-2 .row-body").startswith("w0 w1 w2")
    assert context.page_errors == []


def test_a_reply_ready_elsewhere_shows_a_dot_and_a_notification(
    page, live_server, person, fake_model, context
):
    context.grant_permissions(["notifications"], origin=live_server.url)
    # The notifications the page shows, recorded (the browser's own would show nothing).
    context.add_init_script(
        """
        window.__notes = [];
        const Real = window.Notification;
        class Recorded extends Real {
          constructor(title, options) { super(title, options); window.__notes.push([title, options && options.body]); }
        }
        Object.defineProperty(Recorded, "permission", { get: () => Real.permission });
        Recorded.requestPermission = (...a) => Real.requestPermission(...a);
        window.Notification = Recorded;
        """
    )
    fake_model.script(Turn(text("Your report is ready."), delay_first=1.5))
    log_in(page, live_server)
    away = new_chat(page, live_server)
    here = new_chat(page, live_server)
    page.goto(f"{live_server.url}/chats/{away}")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    send_message(page, "Write the report")
    page.wait_for_selector("#composer.busy")
    page.goto(f"{live_server.url}/chats/{here}")  # look elsewhere while it answers
    page.wait_for_selector("body[data-socket=open]", state="attached")

    page.wait_for_selector(f"#conv-{away}.unread .unread-dot", timeout=20_000)
    assert page.inner_text(f"#conv-{away} .visually-hidden") == "unread"
    page.wait_for_selector("#unread-summary:not([hidden])")
    assert page.inner_text("#unread-summary [data-unread-total]") == "1"
    wait_until(page, "window.__notes.length === 1")
    assert page.evaluate("window.__notes[0][1]") == "Write the report"
    # Opened, it is read: the dot goes.
    page.click(f"#conv-{away} a")
    page.wait_for_selector(f"#conv-{away}:not(.unread)")
    page.wait_for_selector("#unread-summary[hidden]", state="attached")
    assert context.page_errors == []


def test_notify_me_asks_only_when_pressed(page, live_server, person, fake_model, context):
    log_in(page, live_server)
    new_chat(page, live_server)
    assert page.evaluate("Notification.permission") == "default"
    assert page.is_visible("#notify-button")
    context.grant_permissions(["notifications"], origin=live_server.url)

    page.click("#notify-button")

    page.wait_for_selector("#notify-button", state="hidden")
    page.wait_for_selector("#notify-state:has-text('Notifications on')")
