"""The hub: fan-out, live state for late joiners, bounded queues, coalescing."""

from __future__ import annotations

import sys
import threading
import time

from app import events as ev
from app.events import coalesce
from app.stream import hub as hub_module
from app.stream.hub import LocalHub


def test_each_subscriber_gets_every_event_of_its_conversation_only():
    hub = LocalHub()
    first, second, other = hub.subscribe(1), hub.subscribe(1), hub.subscribe(2)
    hub.publish(1, ev.TextDelta(7, "hi"))
    assert first.drain() == second.drain() == [ev.TextDelta(7, "hi")]
    assert other.drain() == []


def test_a_late_subscriber_starts_from_the_live_state():
    hub = LocalHub()
    hub.publish(1, ev.Timeline(7, "resolving_context", "started", detail="list_offers"))
    hub.publish(1, ev.Timeline(7, "resolving_context", "done"))
    hub.publish(1, ev.Timeline(7, "writing", "started", agent="Quiz"))
    hub.publish(1, ev.AgentToken(7, "Quiz", '{"title": '))
    hub.publish(1, ev.TextDelta(7, "Here is "))
    hub.publish(1, ev.TextDelta(7, "the plan"))

    late = hub.subscribe(1)

    assert late.snapshot.text == "Here is the plan"
    assert [(s["stage"], s["state"]) for s in late.snapshot.steps] == [
        ("resolving_context", "done"),
        ("writing", "started"),
    ]
    assert late.snapshot.steps[1]["tokens"] == '{"title": '
    replay = late.snapshot.replay()
    assert replay[-1] == ev.TextDelta(7, "Here is the plan")
    hub.publish(1, ev.TextDelta(7, "!"))
    assert late.drain() == [ev.TextDelta(7, "!")]


def test_a_host_row_closes_the_live_segment_and_done_clears_the_state():
    hub = LocalHub()
    hub.publish(1, ev.TextDelta(7, "Let me look."))
    hub.publish(1, ev.RowPersisted({"kind": "host", "sequence": 2}, 7))
    assert hub.live_state(1).text == ""
    hub.publish(1, ev.Done(7, "completed"))
    assert hub.live_state(1).run_id is None


def test_a_subscriber_that_never_reads_does_not_slow_publishing(monkeypatch):
    monkeypatch.setattr(hub_module, "QUEUE_SIZE", 100)
    hub = LocalHub()
    stuck, reader = hub.subscribe(1), hub.subscribe(1)
    started = time.monotonic()
    for n in range(1_000):
        hub.publish(1, ev.TextDelta(7, str(n)))
    assert time.monotonic() - started < 1.0
    assert stuck.overflowed  # the socket will be closed so the client reconnects and catches up
    assert len(reader.drain()) == 100  # bounded per subscriber


def test_closing_a_subscription_removes_it():
    hub = LocalHub()
    subscription = hub.subscribe(1, user_id=5)
    subscription.close()
    assert hub._by_conversation == {} and hub._by_user == {}


def test_user_events_reach_every_socket_of_that_person():
    hub = LocalHub()
    one, two, stranger = (
        hub.subscribe(1, user_id=5),
        hub.subscribe(2, user_id=5),
        hub.subscribe(3, user_id=6),
    )
    changed = ev.ConversationChanged({"id": 1, "status": "STREAMING"})
    hub.publish_user(5, changed)
    assert one.drain() == two.drain() == [changed]
    assert stranger.drain() == []


def test_coalescing_merges_neighbouring_text_of_one_run_only():
    events = [
        ev.TextDelta(7, "a"),
        ev.TextDelta(7, "b"),
        ev.Timeline(7, "presenting", "started"),
        ev.TextDelta(7, "c"),
        ev.TextDelta(8, "d"),
        ev.AgentToken(7, "Quiz", "x"),
        ev.AgentToken(7, "Quiz", "y"),
    ]
    assert coalesce(events) == [
        ev.TextDelta(7, "ab"),
        ev.Timeline(7, "presenting", "started"),
        ev.TextDelta(7, "c"),
        ev.TextDelta(8, "d"),
        ev.AgentToken(7, "Quiz", "xy"),
    ]


def test_concurrent_publishers_deliver_in_the_order_the_live_state_applied():
    """Two runs' threads publishing into one chat at once: every socket receives the text
    in the order the live state (what a late joiner is shown) put it together."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(2e-5)  # the threads trade places every few publishes
    hub = LocalHub()
    first, second = hub.subscribe(1), hub.subscribe(1)
    start = threading.Barrier(2)

    def publish(letter: str) -> None:
        start.wait()
        for n in range(2_400):
            hub.publish(1, ev.TextDelta(7, f"{letter}{n};"))

    try:
        threads = [threading.Thread(target=publish, args=(letter,)) for letter in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    applied = hub.live_state(1).text
    assert applied.count(";") == 4_800
    assert "".join(e.text for e in first.drain()) == applied
    assert "".join(e.text for e in second.drain()) == applied
