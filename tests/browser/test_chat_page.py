"""The chat page in a real browser: streaming, timeline, cards, reloads, second tabs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from app.workspace.models import Offer
from tests.browser.helpers import log_in, new_chat, screenshot, send_message, wait_until
from tests.fake_model import Turn, text, tool_use

DOCS = Path(__file__).resolve().parents[2] / "docs"

QUIZ = {
    "title": "Which morning type are you?",
    "intro": "Five quick questions about your mornings.",
    "questions": [
        {
            "question": f"What happens at {hour} am?",
            "options": [
                {"label": "Coffee and a plan", "scores": {"calm": 2}},
                {"label": "Email avalanche", "scores": {"rushed": 2}},
            ],
        }
        for hour in (6, 7, 8)
    ],
    "results": [
        {
            "key": "calm",
            "headline": "The calm starter",
            "description": "You protect your mornings.",
            "call_to_action": "Join",
        },
        {
            "key": "rushed",
            "headline": "The rushed starter",
            "description": "Mornings run you.",
            "call_to_action": "Join",
        },
    ],
}


def _offer(live_app, user_id, name="Calm Mornings Coaching"):
    with live_app.extensions["database"].session() as session:
        offer = Offer(
            user_id=user_id,
            name=name,
            description="Coaching for founders",
            price="$490",
            brand_colors=["#2f6f5e", "#f4d35e"],
        )
        session.add(offer)
        session.commit()
        return offer.id


def _pause_on_offer_card(fake_model, delay=0.0):
    fake_model.script(
        Turn(text("Let me check your offers."), tool_use("list_offers", {})),
        Turn(
            text("Which offer is the quiz for?"),
            tool_use("select_offer", {"prompt": "Which offer is the quiz for?"}),
            token_delay=delay,
        ),
    )


def test_a_message_streams_in_and_becomes_a_row(page, live_server, person, fake_model, context):
    fake_model.script(
        # Slow enough to see: the live text is rendered a few times a second, not per token.
        Turn(text("Hello Ada, here is a **bold** idea for your launch."), token_delay=0.08)
    )
    log_in(page, live_server)
    new_chat(page, live_server)

    send_message(page, "Give me an idea")

    page.wait_for_selector("#live-text:has-text('Hello Ada')")
    page.wait_for_selector("#m-2 strong:has-text('bold')")
    assert page.inner_text("#m-1 .row-body") == "Give me an idea"
    wait_until(page, "!document.querySelector('#live-text:not(:empty)')")
    page.wait_for_selector("#composer:not(.busy)")
    assert context.page_errors == []


def test_full_conversation_with_timeline_agent_tokens_and_a_card(
    page, live_server, person, fake_model, live_app
):
    offer_id = _offer(live_app, person[2])
    _pause_on_offer_card(fake_model, delay=0.05)
    log_in(page, live_server)
    new_chat(page, live_server)

    send_message(page, "Make a quiz for my coaching offer")

    # While the second model call streams, the read tool shows as a quiet timeline step.
    page.wait_for_selector("#timeline-steps :text('Resolving context')")
    page.wait_for_selector(".card-q[data-status=awaiting]")
    assert page.locator(".row-tool_result").count() == 0
    fake_model.script(
        Turn(
            text("Writing your quiz now."),
            tool_use("quiz", {"instructions": "Morning quiz", "offer_id": offer_id}),
        ),
        Turn(text(json.dumps(QUIZ, indent=1)), token_delay=0.02),
        Turn(text("Your quiz **Which morning type are you?** is ready."), token_delay=0.02),
    )

    page.click(".card-q label:has-text('Calm Mornings Coaching')")
    page.click(".card-q button[type=submit]:has-text('Use this offer')")

    page.wait_for_selector("#timeline-steps :text('Writing Quiz')")
    page.click(".tl-tokens summary")
    page.wait_for_selector(".code-viewer:has-text('morning type')")
    # The README's picture of the page: an answered card and the run timeline at work.
    shutil.copy(screenshot(page, "chat-page"), DOCS / "chat-page.png")
    page.wait_for_selector(".agent-output h3:has-text('Which morning type are you?')")
    page.wait_for_selector(".row-host strong:has-text('Which morning type are you?')")
    assert page.locator(".card-q[data-status=answered]").count() == 1
    assert "Calm Mornings Coaching" in page.inner_text(".card-q[data-status=answered]")
    assert fake_model.rejections == []


def test_reload_while_a_card_waits_shows_the_same_card_and_answering_resumes(
    page, live_server, person, fake_model, live_app
):
    _offer(live_app, person[2])
    _pause_on_offer_card(fake_model)
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Quiz please")
    card = page.wait_for_selector(".card-q[data-status=awaiting]")
    card_id = card.get_attribute("id")

    page.reload()

    assert page.wait_for_selector(".card-q[data-status=awaiting]").get_attribute("id") == card_id
    fake_model.script(Turn(text("Great, the coaching offer it is."), token_delay=0.01))
    page.click(".card-q label:has-text('Calm Mornings Coaching')")
    page.click(".card-q button[type=submit]")
    page.wait_for_selector(".row-host:has-text('Great, the coaching offer it is.')")
    assert page.locator(f"#{card_id}[data-status=answered]").count() == 1


def test_reload_mid_stream_shows_the_text_so_far_and_keeps_streaming(
    page, live_server, person, fake_model
):
    words = " ".join(f"w{n}" for n in range(120))
    fake_model.script(Turn(text(words), token_delay=0.03))
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Stream a lot")
    page.wait_for_selector("#live-text:has-text('w10 ')")

    page.reload()

    page.wait_for_selector("body[data-socket=open]", state="attached")
    page.wait_for_selector("#live-text")
    text_after_reload = page.inner_text("#live-text")
    assert text_after_reload.startswith("w0 w1 w2")
    page.wait_for_selector("#m-2:has-text('w119')")
    assert page.inner_text("#m-2 .row-body").strip() == words
    # The run's done (a frame of its own over Redis) takes the live segment away.
    wait_until(page, "!document.querySelector('#live-text:not(:empty)')")


def test_a_second_tab_sees_the_same_rows(context, page, live_server, person, fake_model):
    fake_model.script(Turn(text("Both tabs see this."), token_delay=0.02))
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    other = context.new_page()
    other.goto(f"{live_server.url}/chats/{chat_id}")
    other.wait_for_selector("body[data-socket=open]", state="attached")

    send_message(page, "Hello from tab one")

    other.wait_for_selector("#m-1:has-text('Hello from tab one')")
    other.wait_for_selector("#m-2:has-text('Both tabs see this.')")
    page.wait_for_selector("#m-2:has-text('Both tabs see this.')")
    assert page.inner_html("#rows") == other.inner_html("#rows")


def test_the_conversation_list_shows_status_live(page, live_server, person, fake_model):
    fake_model.script(Turn(text("slow " * 30), token_delay=0.05))
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    send_message(page, "Name this chat please")
    page.wait_for_selector(f"#conv-{chat_id} .status-streaming")
    assert "Name this chat please" in page.inner_text(f"#conv-{chat_id}")
    page.wait_for_selector(f"#conv-{chat_id} .status-idle", state="attached")


def test_stop_ends_the_run_and_the_composer_comes_back(page, live_server, person, fake_model):
    fake_model.script(Turn(text("word " * 200), token_delay=0.05))
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Talk for a long time")
    page.wait_for_selector("#live-text:has-text('word word')")
    page.click("button.stop")
    page.wait_for_selector("#composer:not(.busy)")
    assert page.locator("#live-text:not(:empty)").count() == 0


def test_a_busy_chat_shows_a_clear_banner_not_a_silent_failure(
    page, live_server, person, fake_model
):
    fake_model.script(Turn(text("word " * 100), token_delay=0.05))
    log_in(page, live_server)
    chat_id = new_chat(page, live_server)
    send_message(page, "First")
    page.wait_for_selector("#live-text:has-text('word')")
    # A second tab tries to send while the first run is still in flight.
    other = page.context.new_page()
    other.goto(f"{live_server.url}/chats/{chat_id}")
    other.fill("#composer-input", "Second")
    other.evaluate("document.getElementById('composer').requestSubmit()")
    other.wait_for_selector("#banner.banner-shown:has-text('already being written')")


STRUCTURED_REPLY = (
    "## Launch plan\n\n"
    "| Step | Owner |\n|---|---|\n| Draft the ads | Ada |\n| Review | Bo |\n\n"
    "```python\ndef hook():\n    return 'Calm mornings'\n```\n\n"
    + " ".join(f"closing{n}" for n in range(40))
)

# The tags of rendered model content, in document order, without the live segment's two
# wrappers (#live-md-done, #live-md-tail): what the person sees, as structure.
STRUCTURE = """(root) => root ? Array.from(root.querySelectorAll('*'))
    .filter((el) => !['live-md-done', 'live-md-tail'].includes(el.id))
    .map((el) => el.tagName.toLowerCase() + (el.className ? '.' + el.className : ''))
    .join(' ') : null"""


def test_a_table_and_a_code_block_look_the_same_while_streaming_and_after(
    page, live_server, person, fake_model, context
):
    fake_model.script(Turn(text(STRUCTURED_REPLY), token_delay=0.04))
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Plan my launch")

    # Mid-stream: rendered, not raw Markdown.
    page.wait_for_selector("#live-text table td:has-text('Bo')")
    page.wait_for_selector("#live-text pre code.language-python")
    page.wait_for_selector("#live-text :text('closing3')")
    live = page.evaluate(
        """() => {
          const md = document.querySelector('#live-text .md');
          return {
            table: md.querySelector('table').outerHTML,
            code: md.querySelector('.code-block').outerHTML,
            heading: md.querySelector('h4').outerHTML,
            text: md.innerText,
          };
        }"""
    )
    live_structure = page.evaluate(STRUCTURE, page.query_selector("#live-text .md"))
    assert "|---" not in live["text"] and "```" not in live["text"] and "##" not in live["text"]
    assert page.locator("#live-text").count() == 1  # still streaming

    page.wait_for_selector("#m-2 .row-body :text('closing39')")
    final = page.evaluate(
        """() => {
          const md = document.querySelector('#m-2 .row-body.md');
          return {
            table: md.querySelector('table').outerHTML,
            code: md.querySelector('.code-block').outerHTML,
            heading: md.querySelector('h4').outerHTML,
          };
        }"""
    )
    final_structure = page.evaluate(STRUCTURE, page.query_selector("#m-2 .row-body.md"))
    assert live["table"] == final["table"]
    assert live["code"] == final["code"]
    assert live["heading"] == final["heading"]
    assert final_structure.startswith(live_structure.rsplit(" p", 1)[0])
    assert "span.code-lang" in final_structure and "table" in final_structure
    assert page.inner_text("#m-2 .code-lang") == "python"
    assert context.page_errors == []


def test_copy_a_code_block_and_a_whole_message(page, live_server, person, fake_model, context):
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    fake_model.script(Turn(text(STRUCTURED_REPLY)))
    log_in(page, live_server)
    new_chat(page, live_server)
    send_message(page, "Plan my launch")
    page.wait_for_selector("#m-2 .row-body :text('closing39')")

    button = page.locator("#m-2 .code-block button.copy-button")
    assert button.get_attribute("aria-label") == "Copy python code"
    button.focus()  # keyboard reachable: a real button
    page.keyboard.press("Enter")
    page.wait_for_selector("#m-2 .code-block button.copied:has-text('Copied')")
    assert page.evaluate("() => navigator.clipboard.readText()") == (
        "def hook():\n    return 'Calm mornings'\n"
    )
    assert "Copied" in page.inner_text("#copy-status")

    message_button = page.get_by_role("button", name="Copy this answer as Markdown")
    message_button.focus()
    page.wait_for_timeout(250)  # the row's time fades in on focus
    assert page.locator("#m-2 .row-time").evaluate("(el) => getComputedStyle(el).opacity") == "1"
    page.keyboard.press("Space")
    page.wait_for_selector("#m-2 .row-meta button.copied:has-text('Copied')")
    assert page.evaluate("() => navigator.clipboard.readText()") == STRUCTURED_REPLY
    assert context.page_errors == []


def test_rows_show_their_time_and_days_are_separated(page, live_server, person, live_app):
    from datetime import datetime, timedelta

    from app.chat.conversations import create_conversation
    from app.chat.models import Message
    from app.chat.rows import insert_message

    now = datetime.utcnow().replace(microsecond=0)
    with live_app.extensions["database"].session() as session:
        chat_id = create_conversation(session, person[2]).id
        for days_ago, content in ((3, "from three days ago"), (1, "from yesterday"), (0, "today")):
            row = insert_message(session, chat_id, role="user", kind="user", content=content)
            session.flush()
            session.get(Message, row.id).created_at = now - timedelta(days=days_ago)
        session.commit()
    log_in(page, live_server)
    page.goto(f"{live_server.url}/chats/{chat_id}")
    page.wait_for_selector("body[data-socket=open]", state="attached")

    times = page.eval_on_selector_all(
        "#rows .row time.row-time", "(els) => els.map((el) => el.getAttribute('datetime'))"
    )
    assert times == [(now - timedelta(days=d)).strftime("%Y-%m-%dT%H:%M:%SZ") for d in (3, 1, 0)]
    order = page.eval_on_selector_all(
        "#rows > *",
        "(els) => els.map((el) => el.classList.contains('day-sep') ? el.innerText : el.id)",
    )
    assert order[0] not in ("Today", "Yesterday") and order[1] == "m-1"
    assert order[2:] == ["Yesterday", "m-2", "Today", "m-3"]
    # The time is in the page for screen readers; it shows on hover.
    first = page.locator("#m-1 .row-time")
    assert first.evaluate("(el) => getComputedStyle(el).opacity") == "0"
    page.hover("#m-1")
    page.wait_for_timeout(250)
    assert first.evaluate("(el) => getComputedStyle(el).opacity") == "1"
    assert page.inner_text("#m-1 time.row-time") == page.evaluate(
        """() => new Date(document.querySelector('#m-1 time').dateTime)
             .toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })"""
    )


def test_a_row_arriving_live_on_a_new_day_gets_its_separator(
    page, live_server, person, live_app, fake_model
):
    from datetime import datetime, timedelta

    from app.chat.conversations import create_conversation
    from app.chat.models import Message
    from app.chat.rows import insert_message

    with live_app.extensions["database"].session() as session:
        chat_id = create_conversation(session, person[2]).id
        row = insert_message(session, chat_id, role="user", kind="user", content="last week")
        session.flush()
        session.get(Message, row.id).created_at = datetime.utcnow() - timedelta(days=8)
        session.commit()
    fake_model.script(Turn(text("Welcome back."), token_delay=0.01))
    log_in(page, live_server)
    page.goto(f"{live_server.url}/chats/{chat_id}")
    page.wait_for_selector("body[data-socket=open]", state="attached")
    assert page.locator("#rows > .day-sep").count() == 1

    send_message(page, "Hello again")

    page.wait_for_selector("#m-3:has-text('Welcome back.')")
    order = page.eval_on_selector_all(
        "#rows > *",
        "(els) => els.map((el) => el.classList.contains('day-sep') ? el.innerText : el.id)",
    )
    assert order[1:] == ["m-1", "Today", "m-2", "m-3"]
    assert page.locator("#rows > .day-sep time[datetime]").count() == 2
