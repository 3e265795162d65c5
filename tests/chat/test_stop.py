"""Stop keeps what the person saw: the partial answer as a host row marked stopped (or a
"Stopped" notice when nothing was streamed), part of the history the model reads next;
a tool call in flight is recorded as cancelled."""

from __future__ import annotations

import time

from sqlalchemy import update

from app.chat.models import Conversation, ConversationStatus, Run, RunStatus
from app.chat.stop import CANCELLED_RESULT
from app.events import TextDelta
from app.llm.demo import agent_output
from app.workspace.models import Offer
from tests.fake_model import Turn, text, tool_use
from tests.waiting import eventually, scaled

WORDS = " ".join(f"word{n}" for n in range(120))


def _wait_for_live_text(app, chat_id, at_least, timeout=10.0) -> str:
    hub = app.extensions["services"].hub
    return eventually(
        lambda: len(text := hub.live_state(chat_id).text) >= at_least and text,
        timeout,
        "the answer never streamed",
    )


def _stop(chat, chat_id):
    response = chat.post(f"/api/chats/{chat_id}/stop", {})
    assert response.status_code == 200 and response.get_json()["stopped"] is True
    return response.get_json()["runId"]


def _events_until_done(subscription, timeout=10.0) -> list:
    events = []
    deadline = time.monotonic() + scaled(timeout)
    while not events or events[-1].kind != "done":
        assert time.monotonic() < deadline, events
        event = subscription.get(timeout=0.1)
        if event is not None:
            events.append(event)
    return events


def test_stop_mid_stream_keeps_the_partial_answer_marked_stopped(app, chat, fake_model):
    fake_model.script(Turn(text(WORDS), token_delay=0.03))
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Tell me everything")
    _wait_for_live_text(app, chat_id, 40)

    assert _stop(chat, chat_id) == run_id

    assert chat.wait(run_id)["status"] == "cancelled"
    rows = chat.rows(chat_id)
    assert [r["kind"] for r in rows] == ["user", "host"]
    partial = rows[1]
    assert partial["stopped"] is True and partial["role"] == "assistant"
    assert partial["content"].startswith("word0 word1 word2")
    assert WORDS.startswith(partial["content"]) and len(partial["content"]) < len(WORDS)
    assert "stopped" not in rows[0]

    # The model reads it next as what it had said: plain assistant text.
    fake_model.script("Picking up where I stopped.")
    assert chat.wait(chat.send(chat_id, "Go on"))["status"] == "completed"
    assert fake_model.requests[-1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Tell me everything"}]},
        {"role": "assistant", "content": [{"type": "text", "text": partial["content"]}]},
        {"role": "user", "content": [{"type": "text", "text": "Go on"}]},
    ]
    assert fake_model.rejections == []
    assert [r["kind"] for r in chat.rows(chat_id)] == ["user", "host", "user", "host"]
    assert "stopped" not in chat.rows(chat_id)[-1]


def test_the_stopped_row_reaches_open_sockets_and_the_stream_ends(app, chat, fake_model):
    fake_model.script(Turn(text(WORDS), token_delay=0.03))
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id)
    run_id = chat.send(chat_id, "Tell me everything")
    _wait_for_live_text(app, chat_id, 40)

    _stop(chat, chat_id)

    events = _events_until_done(subscription)
    kept = [e for e in events if e.kind == "message" and e.row.get("stopped")]
    assert len(kept) == 1 and kept[0].run_id == run_id
    after = events[events.index(kept[0]) + 1 :]
    assert not [e for e in after if isinstance(e, TextDelta)], "no text after the kept row"
    assert events[-1].kind == "done" and events[-1].status == "cancelled"
    assert app.extensions["services"].hub.live_state(chat_id).run_id is None


def test_the_stop_button_shows_the_kept_row_with_the_idle_composer(app, chat, fake_model):
    # The page's Stop answers with the idle composer; the socket's frames come when they
    # come. The answer carries the kept row and the emptied live text too, so the page never
    # shows an idle composer beside text still marked as being written.
    fake_model.script(Turn(text(WORDS), token_delay=0.03))
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Tell me everything")
    _wait_for_live_text(app, chat_id, 40)

    headers = {"HX-Request": "true", **chat.auth.headers()}
    html = chat.client.post(f"/chats/{chat_id}/stop", headers=headers).get_data(as_text=True)

    chat.wait(run_id)
    kept = chat.rows(chat_id)[1]
    assert kept["stopped"] is True
    assert f'id="m-{kept["sequence"]}"' in html and kept["content"][-12:] in html
    assert '<div id="live-text" class="live-text" hx-swap-oob="true"></div>' in html
    assert 'data-state="idle"' in html


def test_stop_before_the_first_token_leaves_a_stopped_notice(app, chat, fake_model):
    fake_model.script(Turn(text("Too late."), delay_first=8))
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Tell me everything")
    fake_model.wait_for_requests(1)
    future = app.extensions["executor"].futures[run_id]
    started = time.monotonic()

    _stop(chat, chat_id)

    assert future.result(timeout=5) == "cancelled"
    assert time.monotonic() - started < 3, "the silent stream is cut, not waited out"
    rows = chat.rows(chat_id)
    assert [(r["kind"], r["content"], r.get("stopped")) for r in rows] == [
        ("user", "Tell me everything", None),
        ("notice", "Stopped", True),
    ]
    # Nothing of the stopped run reaches the model: the two messages are one user turn.
    fake_model.script("Short version: yes.")
    assert chat.wait(chat.send(chat_id, "Short version?"))["status"] == "completed"
    assert fake_model.requests[-1]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Tell me everything"},
                {"type": "text", "text": "Short version?"},
            ],
        }
    ]
    assert fake_model.rejections == []


def test_stop_while_the_model_writes_a_tool_call_keeps_only_its_text(app, chat, fake_model):
    """The tool call was still being written: it never ran and is not in the history."""
    fake_model.script(
        Turn(
            text("Let me draft those ads."),
            tool_use("ad_copy", {"instructions": "Ads for mornings " * 40}),
            token_delay=1.0,
        )
    )
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Ads please")
    hub = app.extensions["services"].hub
    eventually(
        lambda: hub.live_state(chat_id).text == "Let me draft those ads.",
        10,
        lambda: f"the live text is {hub.live_state(chat_id).text!r}",
    )

    _stop(chat, chat_id)

    assert chat.wait(run_id)["status"] == "cancelled"
    rows = chat.rows(chat_id)
    assert [(r["kind"], r["content"], r.get("stopped")) for r in rows] == [
        ("user", "Ads please", None),
        ("host", "Let me draft those ads.", True),
    ]
    fake_model.script("Fine, no ads then.")
    assert chat.wait(chat.send(chat_id, "Never mind"))["status"] == "completed"
    sent = fake_model.requests[-1]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Let me draft those ads."}],
    }
    assert fake_model.rejections == []


def test_stop_while_a_tool_runs_records_the_call_as_cancelled(app, chat, fake_model):
    """The host's turn with the tool call is persisted and the tool (an agent) is running:
    its tool_use gets a result saying it was cancelled, so the next request is valid."""
    good = agent_output("ad-copy", {"name": "Calm Mornings"})
    fake_model.script(
        Turn(
            text("Handing this to the ad copy writer."),
            tool_use("ad_copy", {"instructions": "Ads"}),
        ),
        Turn(
            text("Drafting the variants now. " * 60),
            tool_use("submit_ad_copy", good),
            token_delay=0.05,
        ),
    )
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Ads please")
    fake_model.wait_for_requests(2)  # the agent is writing
    future = app.extensions["executor"].futures[run_id]

    _stop(chat, chat_id)

    assert future.result(timeout=10) == "cancelled"
    rows = chat.rows(chat_id)
    assert [(r["kind"], r["content"]) for r in rows] == [
        ("user", "Ads please"),
        ("host", "Handing this to the ad copy writer."),
        ("notice", "Stopped"),
    ]
    assert rows[2]["stopped"] is True and "stopped" not in rows[1]

    fake_model.script("All right, we can come back to the ads.")
    assert chat.wait(chat.send(chat_id, "Let's do something else"))["status"] == "completed"
    assert fake_model.rejections == []
    sent = fake_model.requests[-1]["messages"]
    tool_id = sent[1]["content"][-1]["id"]
    assert sent[1]["content"][-1]["type"] == "tool_use"
    assert sent[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": CANCELLED_RESULT,
            "is_error": True,
        },
        {"type": "text", "text": "Let's do something else"},
    ]


def test_stop_between_model_calls_writes_only_the_notice(app, chat, fake_model):
    """Cancelled after a tool-calling turn was persisted and before the next call streamed
    anything: the earlier turn stays as it was, and the notice says the run stopped."""
    fake_model.script(
        Turn(text("Let me check your offers."), tool_use("list_offers", {})),
        Turn(text("You have no offers yet."), delay_first=8),
    )
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "What do I sell?")
    fake_model.wait_for_requests(2)

    _stop(chat, chat_id)

    assert chat.wait(run_id)["status"] == "cancelled"
    rows = chat.rows(chat_id)
    assert [(r["kind"], r.get("stopped")) for r in rows] == [
        ("user", None),
        ("host", None),
        ("notice", True),
    ]
    fake_model.script("Still nothing to list.")
    assert chat.wait(chat.send(chat_id, "Well?"))["status"] == "completed"
    assert fake_model.rejections == []


def test_stop_with_no_run_in_flight_changes_nothing(app, chat, fake_model):
    fake_model.script("Done already.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    response = chat.post(f"/api/chats/{chat_id}/stop", {})
    assert response.get_json() == {"stopped": False, "runId": None}
    assert [r["kind"] for r in chat.rows(chat_id)] == ["user", "host"]


def test_stop_still_works_when_the_live_state_cannot_be_read(app, chat, fake_model, monkeypatch):
    """Redis not answering: the run is stopped all the same, with the notice."""
    fake_model.script(Turn(text(WORDS), token_delay=0.03))
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Tell me everything")
    _wait_for_live_text(app, chat_id, 20)
    hub = app.extensions["services"].hub

    def unavailable(conversation_id):
        raise ConnectionError("Redis is not answering")

    monkeypatch.setattr(hub, "live_state", unavailable)

    _stop(chat, chat_id)

    assert chat.wait(run_id)["status"] == "cancelled"
    assert [(r["kind"], r.get("stopped")) for r in chat.rows(chat_id)] == [
        ("user", None),
        ("notice", True),
    ]


def test_a_stop_after_the_card_was_written_closes_the_card(app, chat, fake_model):
    """The card row commits while its run still runs (the run pauses on it a moment
    later): a stop in between cancels the call and closes its card, so the card can no
    longer be answered and the call has exactly one result."""
    with app.extensions["database"].session() as session:
        session.add(Offer(user_id=chat.user_id, name="Calm Mornings", description="Coaching"))
        session.commit()
    fake_model.script(
        Turn(
            text("Which one?"),
            tool_use("select_offer", {"prompt": "Which offer?"}, id="toolu_gap"),
        )
    )
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Make a quiz")
    assert chat.wait(run_id)["status"] == "awaiting"
    with app.extensions["database"].session() as session:  # back to the moment before the pause
        session.execute(update(Run).where(Run.id == run_id).values(status=RunStatus.RUNNING))
        session.execute(
            update(Conversation)
            .where(Conversation.id == chat_id)
            .values(active_run_id=run_id, status=ConversationStatus.STREAMING)
        )
        session.commit()

    _stop(chat, chat_id)

    card = next(r for r in chat.rows(chat_id) if r["kind"] == "card")["card"]
    assert card["status"] == "dismissed"
    refused = chat.answer(chat_id, "toolu_gap", {"offer_id": 1})
    assert refused.status_code == 409
    assert refused.get_json()["error"]["code"] == "CARD_NOT_AWAITING"
    fake_model.script("All right.")
    assert chat.wait(chat.send(chat_id, "Never mind"))["status"] == "completed"
    assert fake_model.rejections == []
    results = [
        block
        for message in fake_model.requests[-1]["messages"]
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if block.get("type") == "tool_result"
    ]
    assert [(b["tool_use_id"], b["content"]) for b in results] == [("toolu_gap", CANCELLED_RESULT)]
