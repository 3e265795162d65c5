"""The chat header's context gauge: the request builder's own numbers for the next call
(the next request the model server receives agrees), the last turn's credits, the same as
JSON, and pushed to every open tab when a run ends."""

from __future__ import annotations

import json
import math
import time

import pytest

from app.chat.context_gauge import Gauge, tokens
from app.llm.budget import estimate_messages, estimate_text, estimate_tools
from tests.fake_model import Turn, text
from tests.live import LiveServer, connect_socket
from tests.waiting import eventually, scaled
from tests.web.test_sockets import _chat, _start_run, _token


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


def test_the_gauge_counts_what_the_next_request_holds(app, chat, fake_model):
    fake_model.script(Turn(text("Hello! What shall we write?")), Turn(text("A tagline it is.")))
    chat_id = chat.new_chat("Gauge")
    assert chat.wait(chat.send(chat_id, "Hello there"))["status"] == "completed"
    gauge = chat.client.get(f"/api/chats/{chat_id}/context").get_json()
    factor = app.extensions["services"].calibration.factor(chat_id)

    second = "Write me a tagline."
    assert chat.wait(chat.send(chat_id, second))["status"] == "completed"
    sent = fake_model.requests[-1]  # the second run's one call: what the gauge foresaw
    assert gauge["reserved_output"] == sent["max_tokens"]
    assert gauge["system_and_tools"] == math.ceil(
        (estimate_tools(sent["tools"]) + estimate_text(sent["system"])) * factor
    )
    # Its history is the request's, less the message sent since.
    assert sent["messages"][-1]["role"] == "user"
    assert gauge["history"] == math.ceil(estimate_messages(sent["messages"][:-1]) * factor)
    settings = app.extensions["services"].settings
    assert gauge["window"] == settings.context_window_tokens
    used = gauge["history"] + gauge["system_and_tools"] + gauge["reserved_output"]
    assert gauge["used"] == used
    assert gauge["percent"] == round(used * 100 / gauge["window"])
    assert gauge["label"] == (
        f"Context {gauge['percent']}% · {tokens(used)} of {tokens(gauge['window'])}"
    )
    assert gauge["last_turn_credits"] == 2  # the host model's default weight, no tool calls

    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert '<div id="context-gauge" class="context-gauge">' in page
    assert '<meter id="context-gauge-meter"' in page
    assert "Last turn: 2 credits" in page


def test_a_new_chat_has_an_empty_gauge_and_no_cost_yet(app, chat):
    chat_id = chat.new_chat()
    gauge = chat.client.get(f"/api/chats/{chat_id}/context").get_json()
    assert gauge["history"] == 0 and gauge["last_turn_credits"] is None
    assert gauge["system_and_tools"] > 0 and gauge["reserved_output"] > 0
    assert "Last turn" not in chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert chat.client.get("/api/chats/999/context").status_code == 404


def test_the_label_reads_as_people_count():
    gauge = Gauge(200_000, 60_000, 8_000, 8_192, None)
    assert gauge.label == "Context 38% · 76k of 200k"
    assert Gauge(1_000, 5_000, 100, 100, 1).percent == 100  # over: compacted next call
    assert [tokens(n) for n in (950, 1_500, 68_400, 1_200_000)] == ["950", "1.5k", "68k", "1.2M"]


@pytest.fixture
def server(app):
    live = LiveServer(app).start()
    app.config["LOOPDESK"] = app.config["LOOPDESK"].model_copy(update={"public_url": live.url})
    yield live
    live.stop()


def test_every_open_tab_gets_the_gauge_when_a_run_ends(app, server, auth, fake_model):
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    fake_model.script(Turn(text("Counted.")))
    tabs = [
        connect_socket(
            f"{server.ws_url}/ws/chats/{chat_id}", headers={"Authorization": f"Bearer {token}"}
        )
        for _ in range(2)
    ]
    try:
        for tab in tabs:
            tab.send(json.dumps({"after": 0}))
        hub = app.extensions["services"].hub
        eventually(lambda: len(hub._by_conversation.get(chat_id) or ()) == 2, 5.0, "two tabs")
        _start_run(server, token, chat_id, "Count this")
        received = [_until(tab, 'id="context-gauge"') for tab in tabs]
    finally:
        for tab in tabs:
            tab.close()
    for html in received:
        assert '<div id="context-gauge" class="context-gauge" hx-swap-oob="true">' in html
        assert "Last turn: 2 credits" in html
        assert "Context " in html


def _until(ws, needle: str, timeout: float = 10.0) -> str:
    received = ""
    deadline = time.monotonic() + scaled(timeout)
    while needle not in received:
        assert time.monotonic() < deadline, received
        received += ws.receive(timeout=0.5) or ""
    return received


def test_the_gauge_is_sent_after_a_run_a_compaction_or_a_branch_change():
    from app import events as ev
    from app.web.context_gauge import changes_context

    compacted = {"kind": "notice", "sequence": 9, "summary": "Earlier: a quiz."}
    assert changes_context([ev.Done(1, "completed")])
    assert changes_context([ev.RowPersisted(compacted, 1)])
    assert changes_context([ev.BranchChanged()])
    assert not changes_context([ev.RowPersisted({"kind": "host", "sequence": 3}, 1)])
    assert not changes_context([ev.TextDelta(1, "Hel")])
