"""Events cross processes in their wire form (the Redis hub): every kind comes back equal."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from app import events as ev

EVERY_KIND = [
    ev.TextDelta(7, 'Hé, "quoted" <b>text</b> 🎉'),
    ev.HostTurn(7, "Let me look that up."),
    ev.Timeline(7, "resolving_context", "started", detail="list_offers"),
    ev.Timeline(7, "writing", "done", agent="Quiz"),
    ev.AgentToken(7, "Quiz", '{"title": '),
    ev.ToolCallCard(
        7,
        "toolu_01",
        "select_offer",
        {"toolUseId": "toolu_01", "tool": "select_offer", "options": [{"label": "A", "n": 1}]},
    ),
    ev.RowPersisted({"id": 3, "sequence": 2, "kind": "host", "card": None, "content": "x"}, 7),
    ev.RowPersisted({"id": 1, "sequence": 1, "kind": "user", "content": "hi"}),
    ev.Done(7, "completed"),
    ev.RunError("model_overloaded", "The model is busy.", 7),
    ev.RunError("internal", "Something went wrong."),
    ev.Status(7, "retrying", 1_767_225_600_000),
    ev.Keepalive(7),
    ev.BranchChanged(),
    ev.BranchChanged(leaf=4, version="3-4", messages=[{"id": 1, "sequence": 1}]),
    ev.ConversationChanged({"id": 1, "title": "Plan", "status": "STREAMING"}),
    ev.ConversationDeleted(1),
    ev.QueueChanged([{"id": 2, "message": "Later", "created_at": "2026-12-05T09:00:00Z"}]),
    ev.AccessEnded(generation=3),
    ev.AccessEnded(token_id=9),
    ev.AccessEnded(everything=True),
]


def test_the_samples_cover_every_event_kind():
    assert {type(event) for event in EVERY_KIND} == set(get_args(ev.Event))


@pytest.mark.parametrize("event", EVERY_KIND, ids=lambda event: event.kind)
def test_every_event_round_trips_through_its_json_frame(event):
    frame = json.loads(json.dumps(ev.to_wire(event)))
    assert ev.from_wire(frame) == event


def test_a_frame_that_is_not_an_event_is_refused():
    with pytest.raises(KeyError):
        ev.from_wire({"type": "nonsense"})
    with pytest.raises(TypeError):
        ev.from_wire({"type": "textDelta", "runId": 7, "text": "x", "extra": 1})
