"""The working indicator's events: a `status` frame (thinking, retrying) from the moment a
message is sent until the first token, for open sockets and for ones that join mid-wait."""

from __future__ import annotations

import json
import re
import time

from app.events import Status, TextDelta, to_wire
from app.stream.live import LiveState
from app.web.frames import HtmlFrames, JsonFrames
from tests.fake_model import Turn, api_error, stream_error, text
from tests.waiting import eventually, scaled


def _events_until_done(subscription, timeout=10.0) -> list:
    events = []
    deadline = time.monotonic() + scaled(timeout)
    while not events or events[-1].kind != "done":
        assert time.monotonic() < deadline, events
        event = subscription.get(timeout=0.1)
        if event is not None:
            events.append(event)
    return events


def test_status_frames_say_thinking_then_retrying_until_the_text_starts(app, chat, fake_model):
    fake_model.script(api_error(529, "overloaded_error", retry_after=0.01), "Back again.")
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id)
    before = int(time.time() * 1000)

    run_id = chat.send(chat_id, "Hello")
    events = _events_until_done(subscription)
    assert events[-1].status == "completed"
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    statuses = [e for e in events if isinstance(e, Status)]
    assert [s.state for s in statuses] == ["thinking", "retrying"]
    assert all(events.index(s) < first_text for s in statuses)
    assert all(s.run_id == run_id and s.since >= before for s in statuses)
    assert to_wire(statuses[1]) == {
        "type": "status",
        "runId": run_id,
        "state": "retrying",
        "since": statuses[1].since,
        "reason": "busy",
    }
    # The retry continues the wait that began when the message was sent.
    live = LiveState()
    for event in events[: events.index(statuses[1]) + 1]:
        live.apply(event)
    assert (live.status, live.status_since, live.status_reason) == (
        "retrying",
        statuses[0].since,
        "busy",
    )
    assert live.replay()[-1].reason == "busy"  # a socket joining now is told it too
    assert len(fake_model.requests) == 2

    # What the pages were sent: the indicator, its retry, and its end with the text.
    frames = HtmlFrames(chat_id, type(subscription.snapshot)())
    rendered_from = time.time() * 1000
    with app.test_request_context():
        html = ["".join(frames.render([event])) for event in events]
    rendered_by = time.time() * 1000
    thinking = next(h for h in html if 'data-state="thinking"' in h)
    assert "Thinking…" in thinking
    # Counted in whole seconds from when the wait began to the render (the run's first
    # model call may take a second: it imports the SDK in a process that has not yet).
    elapsed = int(re.search(r'data-elapsed="(\d+)"', thinking)[1])
    since = statuses[0].since
    assert (rendered_from - since) // 1000 <= elapsed <= (rendered_by - since) // 1000
    assert any("The model is busy, retrying…" in h for h in html)
    ended = html[first_text]
    assert '<div id="live-status" class="live-status" hx-swap-oob="true"></div>' in ended
    json_frames = [
        json.loads(f) for f in JsonFrames(chat_id, type(subscription.snapshot)()).render(events)
    ]
    assert [f["state"] for f in json_frames if f["type"] == "status"] == ["thinking", "retrying"]


def test_a_page_joining_while_the_model_thinks_sees_the_indicator(app, chat, fake_model):
    fake_model.script(Turn(text("Here it is."), delay_first=1.5))
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Hello")
    fake_model.wait_for_requests(1)
    hub = app.extensions["services"].hub
    # A second of thinking, counted from when the indicator says it began (the model's
    # first token is 1.5 s away).
    eventually(
        lambda: (
            (since := hub.live_state(chat_id).status_since) is not None
            and time.time() * 1000 - since >= 1000
        ),
        5,
        "the model has not been thinking for a second",
    )

    subscription = hub.subscribe(chat_id)
    try:
        snapshot = subscription.snapshot
        assert (snapshot.run_id, snapshot.status) == (run_id, "thinking")
        with app.test_request_context():
            html = HtmlFrames(chat_id, snapshot.copy()).opening()[0]
        assert "Thinking…" in html and 'data-elapsed="1"' in html
        opening = [json.loads(f) for f in JsonFrames(chat_id, snapshot.copy()).opening()]
        assert opening == [
            {"type": "status", "runId": run_id, "state": "thinking", "since": snapshot.status_since}
        ]
        events = _events_until_done(subscription)
        assert [e.kind for e in events][:1] == ["textDelta"]  # the wait ends with the text
        assert hub.live_state(chat_id).status is None  # gone at done
    finally:
        subscription.close()


def test_a_retry_mid_stream_discards_the_text_of_the_failed_attempt(app, chat, fake_model):
    fake_model.script(Turn(text("Half an "), stream_error("overloaded_error")), "Whole answer.")
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id)

    chat.send(chat_id, "Hello")
    events = _events_until_done(subscription)

    assert events[-1].status == "completed"
    retry = next(i for i, e in enumerate(events) if isinstance(e, Status) and e.state == "retrying")
    assert "".join(e.text for e in events[:retry] if isinstance(e, TextDelta)) == "Half an "
    live = LiveState()
    for event in events[: retry + 1]:
        live.apply(event)
    assert (live.text, live.status) == ("", "retrying")
    with app.test_request_context():
        html = "".join(HtmlFrames(chat_id, live.copy()).render([events[retry]]))
    assert '<div id="live-text" class="live-text" hx-swap-oob="true"></div>' in html
    assert "The model is busy, retrying…" in html
    assert chat.rows(chat_id)[-1]["content"] == "Whole answer."
