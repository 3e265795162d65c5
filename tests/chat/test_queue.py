"""Queue and steer (app/chat/queue.py, docs/CONTRACT.md): a message sent with
`"when": "after"` while a reply is written waits in the chat's queue and starts the next
run when that reply completes; `"when": "now"` stops the reply where it is (keeping what
it wrote, as Stop does) and sends at once. Without `when`, a busy chat still answers 409."""

from __future__ import annotations

from app.chat.models import QueuedMessage
from app.chat.queue import QUEUE_LIMIT
from tests.factories import add_offer
from tests.fake_model import Turn, text, tool_use
from tests.waiting import eventually

WORDS = " ".join(f"word{n}" for n in range(200))


def _slow_reply(fake_model, then: str | None = None):
    fake_model.script(Turn(text(WORDS), token_delay=0.03), *([then] if then else []))


def _wait_for_text(app, chat_id, at_least=30) -> str:
    hub = app.extensions["services"].hub
    return eventually(
        lambda: len(live := hub.live_state(chat_id).text) >= at_least and live,
        10,
        "the answer never streamed",
    )


def _queue(chat, chat_id, message, when="after"):
    return chat.post(f"/api/chats/{chat_id}/loop", {"message": message, "when": when})


def test_a_queued_message_is_sent_when_the_reply_completes(app, chat, fake_model):
    _slow_reply(fake_model, then="Second answer.")
    chat_id = chat.new_chat()
    first = chat.send(chat_id, "First question")
    _wait_for_text(app, chat_id, 10)

    queued = _queue(chat, chat_id, "Second question")

    assert queued.status_code == 202
    body = queued.get_json()
    assert body["queued"] is True and body["runId"] is None
    assert body["queuedMessage"]["message"] == "Second question"
    listed = chat.client.get(f"/api/chats/{chat_id}/queue").get_json()["queue"]
    assert [item["message"] for item in listed] == ["Second question"]
    # Without `when`, the busy chat refuses as before.
    refused = chat.post(f"/api/chats/{chat_id}/loop", {"message": "Third"})
    assert refused.status_code == 409 and refused.get_json()["error"]["code"] == "RUN_IN_FLIGHT"

    assert chat.wait(first)["status"] == "completed"
    rows = eventually(lambda: len(r := chat.rows(chat_id)) == 4 and r, 15, "no second answer")
    assert [(r["kind"], r["content"]) for r in rows][2:] == [
        ("user", "Second question"),
        ("host", "Second answer."),
    ]
    assert chat.client.get(f"/api/chats/{chat_id}/queue").get_json()["queue"] == []
    # The model read the first exchange whole, then the queued message.
    assert fake_model.requests[-1]["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "Second question"}],
    }


def test_the_queue_holds_at_most_its_limit_and_items_can_be_removed(app, chat, fake_model):
    _slow_reply(fake_model)
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Go")
    _wait_for_text(app, chat_id, 5)
    ids = [
        _queue(chat, chat_id, f"later {n}").get_json()["queuedMessage"]["id"]
        for n in range(QUEUE_LIMIT)
    ]

    full = _queue(chat, chat_id, "one too many")

    assert full.status_code == 409 and full.get_json()["error"]["code"] == "QUEUE_FULL"
    removed = chat.client.delete(
        f"/api/chats/{chat_id}/queue/{ids[0]}", headers=chat.auth.headers()
    )
    assert removed.status_code == 204
    again = chat.client.delete(f"/api/chats/{chat_id}/queue/{ids[0]}", headers=chat.auth.headers())
    assert again.status_code == 404
    listed = chat.client.get(f"/api/chats/{chat_id}/queue").get_json()["queue"]
    assert [item["message"] for item in listed] == [f"later {n}" for n in range(1, QUEUE_LIMIT)]
    # A stop leaves the queue as it is: nothing is sent by itself after a Stop.
    assert chat.post(f"/api/chats/{chat_id}/stop", {}).get_json()["stopped"] is True
    assert chat.wait(run_id)["status"] == "cancelled"
    with app.extensions["database"].session() as session:
        assert session.query(QueuedMessage).filter_by(conversation_id=chat_id).count() == 4
    # Send now: the one chosen starts a run, off the queue.
    fake_model.script("Two.", "One.", "Three.", "Four.")
    sent = chat.post(f"/api/chats/{chat_id}/queue/{ids[2]}/send", {})
    assert sent.status_code == 202
    # It runs first; once it completes, the rest of the queue follows in order.
    sent_in_order = ["Go", "later 2", "later 1", "later 3", "later 4"]
    eventually(
        lambda: (
            [r["content"] for r in chat.rows(chat_id) if r["kind"] == "user"] == sent_in_order
            and chat.rows(chat_id)[-1]["content"] == "Four."
        ),
        20,
        "the queue did not drain in order",
    )


def test_queue_when_idle_sends_at_once(app, chat, fake_model):
    fake_model.script("Hello.")
    chat_id = chat.new_chat()

    response = _queue(chat, chat_id, "Hi")

    assert response.status_code == 202 and response.get_json()["runId"] is not None
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"


def test_the_queue_waits_while_a_card_waits_and_goes_on_after_its_answer(app, chat, fake_model):
    offer_id = add_offer(app, chat.user_id)
    fake_model.script(
        Turn(
            text(WORDS[:200] + " Which one?"),
            tool_use("select_offer", {"prompt": "Which offer?"}, id="toolu_pick"),
            token_delay=0.02,
        )
    )
    chat_id = chat.new_chat()
    first = chat.send(chat_id, "Write an ad")
    _wait_for_text(app, chat_id, 5)
    assert _queue(chat, chat_id, "And a subject line").get_json()["queued"] is True

    assert chat.wait(first)["status"] == "awaiting"

    # The card waits for the person: so does the queue.
    assert len(chat.client.get(f"/api/chats/{chat_id}/queue").get_json()["queue"]) == 1
    assert chat.rows(chat_id)[-1]["kind"] == "card"
    fake_model.script("Here is the ad.", "Subject: Hello.")
    answered = chat.answer(chat_id, "toolu_pick", {"offer_id": offer_id})
    assert answered.status_code == 202, answered.get_json()
    chat.wait(answered.get_json()["runId"])
    rows = eventually(
        lambda: (r := chat.rows(chat_id))[-1]["content"] == "Subject: Hello." and r,
        15,
        "the queued message never ran after the card's answer",
    )
    assert [r["content"] for r in rows if r["kind"] == "user"][-1] == "And a subject line"


def test_steer_stops_the_reply_keeping_its_text_and_sends_now(app, chat, fake_model):
    _slow_reply(fake_model, then="Shorter, then.")
    chat_id = chat.new_chat()
    first = chat.send(chat_id, "Tell me everything")
    _wait_for_text(app, chat_id, 40)

    steered = _queue(chat, chat_id, "Make it shorter", when="now")

    assert steered.status_code == 202
    second = steered.get_json()["runId"]
    assert second != first
    assert chat.wait(first)["status"] == "cancelled"
    assert chat.wait(second)["status"] == "completed"
    rows = chat.rows(chat_id)
    assert [r["kind"] for r in rows] == ["user", "host", "user", "host"]
    assert rows[1]["stopped"] is True and rows[1]["content"].startswith("word0 word1")
    assert rows[2]["content"] == "Make it shorter" and rows[3]["content"] == "Shorter, then."
