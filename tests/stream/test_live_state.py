"""The live state's rules, stated once (app/stream/live.py `live_effect`): when a run
starts, resets and keeps a row. The hubs and the frames all follow them."""

from __future__ import annotations

from app import events as ev
from app.stream.live import LiveEffect, LiveState, live_effect

ROW = {"kind": "host", "sequence": 4, "content": "Done."}


def test_every_event_is_classified_by_what_it_does_to_the_live_state():
    assert live_effect(ev.TextDelta(7, "Hi")) is LiveEffect.RUN
    assert live_effect(ev.Timeline(7, "writing", "started", agent="Quiz")) is LiveEffect.RUN
    assert live_effect(ev.Status(7, "thinking", 1)) is LiveEffect.RUN
    assert live_effect(ev.RunError("model_overloaded", "busy", 7)) is LiveEffect.RUN
    assert live_effect(ev.RowPersisted(ROW, 7)) is LiveEffect.ROW
    assert live_effect(ev.Done(7, "completed")) is LiveEffect.DONE
    # Not about a run's live part: no run, a list update, a keepalive.
    assert live_effect(ev.RowPersisted(ROW)) is LiveEffect.NONE
    assert live_effect(ev.RunError("internal", "not about a run")) is LiveEffect.NONE
    assert live_effect(ev.ConversationChanged({"id": 1, "status": "IDLE"})) is LiveEffect.NONE
    assert live_effect(ev.Keepalive(7)) is LiveEffect.NONE


def test_a_runs_first_event_starts_it_anew_and_only_its_own_done_ends_it():
    live = LiveState()
    assert live.apply(ev.TextDelta(7, "Hello")) is True
    assert live.apply(ev.TextDelta(7, " there")) is False
    assert live.text == "Hello there"
    assert live.apply(ev.Done(8, "completed")) is False  # another run's end
    assert (live.run_id, live.text) == (7, "Hello there")
    assert live.apply(ev.TextDelta(9, "New")) is True  # another run's event: a fresh start
    assert (live.run_id, live.text) == (9, "New")
    live.apply(ev.Done(9, "completed"))
    assert live == LiveState()


def test_a_row_belongs_to_the_live_run_only_when_its_run_is_the_live_one():
    live = LiveState()
    live.apply(ev.TextDelta(7, "Streaming"))
    assert live.apply(ev.RowPersisted(ROW, 5)) is False  # a row of a request, not this run
    assert (live.run_id, live.text) == (7, "Streaming")
    live.apply(ev.RowPersisted(ROW, 7))  # the run's own host row closes the segment
    assert (live.run_id, live.text) == (7, "")
    assert LiveState().apply(ev.RowPersisted(ROW, 7)) is False  # never starts a run


def test_the_first_text_ends_the_wait_and_later_text_adds_to_it():
    live = LiveState()
    live.apply(ev.Status(7, "thinking", 1_000))
    assert live.apply(ev.TextDelta(7, "Hi")) is False
    assert (live.status, live.status_since, live.text) == (None, None, "Hi")
    live.apply(ev.TextDelta(7, " you"))
    assert live.text == "Hi you"
