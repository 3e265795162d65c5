"""The hub over Redis: a run in one process streams to sockets in others, and a socket that
joins mid-run neither misses nor doubles anything. Each RedisHub here stands for a process;
each test has its own key prefix on the real Redis at REDIS_URL."""

from __future__ import annotations

import random
import threading
import time

import pytest
import redis

from app import events as ev
from app.stream import hub as hub_module
from app.stream.hub import LocalHub
from app.stream.live import LiveState
from app.stream.redis_hub import RedisHub
from tests.factories import REDIS_URL, needs_redis
from tests.waiting import eventually, scaled

pytestmark = needs_redis


@pytest.fixture
def prefix(redis_namespace):
    return f"{redis_namespace}:"


@pytest.fixture
def process(prefix):
    """A new process's hub (call once per process)."""
    hubs = []

    def start(**options) -> RedisHub:
        hub = RedisHub(REDIS_URL, prefix=prefix, **options)
        hubs.append(hub)
        return hub

    yield start
    for hub in hubs:
        hub.close()


@pytest.fixture
def client():
    connection = redis.Redis.from_url(REDIS_URL)
    yield connection
    connection.close()


def until_done(subscription, timeout=10.0) -> list[ev.Event]:
    events = []
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        event = subscription.get(timeout=0.5)
        if event is None:
            continue
        events.append(event)
        if isinstance(event, ev.Done):
            return events
    raise TimeoutError(events)


FENCE = ev.Keepalive(0)  # published last: whatever came before it has been handed on

# A run's events touching every part of the live state, then the events around runs.
A_RUN = [
    ev.RowPersisted({"kind": "user", "sequence": 1, "content": "hi"}, 7),  # from the request
    ev.Keepalive(7),
    ev.Timeline(7, "resolving_context", "started", detail="list_offers"),
    ev.Timeline(7, "resolving_context", "started", detail="get_offer"),
    ev.TextDelta(7, "Let me "),
    ev.TextDelta(7, "look."),
    ev.HostTurn(7, "Let me look."),
    ev.RowPersisted({"kind": "host", "sequence": 2, "content": "Let me look."}, 7),
    ev.Timeline(7, "resolving_context", "done"),
    ev.Timeline(7, "writing", "started", agent="Quiz"),
    ev.AgentToken(7, "Quiz", '{"title": '),
    ev.AgentToken(7, "Quiz", '"Which offer?"}'),
    ev.Timeline(7, "writing", "done", agent="Quiz"),
    ev.RowPersisted({"kind": "agent_output", "sequence": 3, "content": "x" * 5000}, 7),
    ev.Timeline(7, "presenting", "started"),
    ev.TextDelta(7, "Here is "),
    ev.ConversationChanged({"id": 1, "status": "STREAMING"}),
    ev.RunError("internal", "not about the run"),
    ev.TextDelta(7, "your quiz."),
]


def test_events_published_in_one_process_reach_sockets_in_another_in_order(process):
    worker, web = process(), process()
    socket, elsewhere = web.subscribe(1), web.subscribe(2)
    for n in range(300):
        worker.publish(1, ev.TextDelta(7, f"{n} "))
    worker.publish(1, ev.Done(7, "completed"))
    events = until_done(socket)
    assert events == [ev.TextDelta(7, f"{n} ") for n in range(300)] + [ev.Done(7, "completed")]
    # One listener hands on what Redis sends in order: the first thing chat 2 hears is
    # what was published to it after all of chat 1's events.
    worker.publish(2, FENCE)
    assert elsewhere.get(timeout=scaled(2)) == FENCE


def test_subscribe_returns_only_once_redis_delivers_to_it(process):
    worker, web = process(), process()
    for conversation_id in range(1, 21):
        socket = web.subscribe(conversation_id)
        worker.publish(conversation_id, ev.TextDelta(7, "first"))  # no pause in between
        assert socket.get(timeout=2) == ev.TextDelta(7, "first")


def test_a_late_joiner_starts_from_what_the_live_state_would_have_built(process):
    worker, web = process(), process()
    expected = LiveState()
    for event in A_RUN:
        worker.publish(1, event)
        expected.apply(event)

    late = web.subscribe(1)

    assert late.snapshot == expected
    assert late.snapshot.text == "Here is your quiz."
    assert late.snapshot.steps[1]["tokens"] == '{"title": "Which offer?"}'
    assert web.live_state(1) == expected
    worker.publish(1, ev.TextDelta(7, "!"))
    worker.publish(1, ev.Done(7, "completed"))
    assert until_done(late) == [ev.TextDelta(7, "!"), ev.Done(7, "completed")]


def test_the_live_state_follows_the_in_process_hub_event_by_event(process):
    """Whatever the events, a socket in another process sees the live state that a socket
    in the run's own process would (LocalHub is the reference)."""
    worker, web = process(), LocalHub()
    story = [
        *A_RUN,
        ev.ToolCallCard(7, "toolu_1", "select_offer", {"tool": "select_offer"}),
        ev.RunError("model_overloaded", "busy", 7),
        ev.Done(6, "completed"),  # some other run's end changes nothing
        ev.Keepalive(8),  # a run that starts without its predecessor's Done
        ev.TextDelta(8, "Fresh start"),
        ev.RowPersisted({"kind": "card", "sequence": 9}, 8),
        ev.TextDelta(8, " again"),
        ev.Done(8, "awaiting"),
        ev.RowPersisted({"kind": "host", "sequence": 10}, 8),  # after Done: ignored
        ev.TextDelta(9, "Next"),
    ]
    for event in story:
        worker.publish(1, event)
        web.publish(1, event)
        assert worker.live_state(1) == web.live_state(1), event


def test_sockets_joining_at_random_moments_miss_nothing_and_see_nothing_twice(process):
    worker = process()
    webs = [process(), process()]
    tokens = [f"t{n} " for n in range(150)]
    words = [f"w{n} " for n in range(900)]
    results = []
    finished = threading.Event()

    def run():
        worker.publish(1, ev.Timeline(7, "writing", "started", agent="Quiz"))
        for n, token in enumerate(tokens):
            worker.publish(1, ev.AgentToken(7, "Quiz", token))
            if n % 10 == 0:
                time.sleep(0.002)
        worker.publish(1, ev.Timeline(7, "writing", "done", agent="Quiz"))
        for n, word in enumerate(words):
            worker.publish(1, ev.TextDelta(7, word))
            if n % 10 == 0:
                time.sleep(0.002)
        worker.publish(1, ev.Done(7, "completed"))
        finished.set()

    def join(web, delay):
        time.sleep(delay)
        socket = web.subscribe(1)
        events = []
        while True:
            event = socket.get(timeout=0.5)
            if event is None:
                if finished.is_set():
                    break  # joined after the end: nothing comes
                continue
            events.append(event)
            if isinstance(event, ev.Done):
                break
        socket.close()
        results.append((socket.snapshot, events))

    publisher = threading.Thread(target=run)
    joiners = [
        threading.Thread(target=join, args=(random.choice(webs), random.uniform(0, 0.3)))
        for _ in range(30)
    ]
    publisher.start()
    for joiner in joiners:
        joiner.start()
    for thread in (publisher, *joiners):
        thread.join(timeout=30)

    mid_run = 0
    for snapshot, events in results:
        if snapshot.run_id is None and not events:
            continue  # joined after Done
        assert events[-1] == ev.Done(7, "completed")
        text = snapshot.text + "".join(e.text for e in events if isinstance(e, ev.TextDelta))
        agent_tokens = (snapshot.steps[0]["tokens"] if snapshot.steps else "") + "".join(
            e.text for e in events if isinstance(e, ev.AgentToken)
        )
        assert text == "".join(words)
        assert agent_tokens == "".join(tokens)
        if snapshot.run_id is not None:
            mid_run += 1
    assert len(results) == 30
    assert mid_run >= 5, "too few sockets joined while the run was going"


def test_done_clears_the_live_state(process):
    worker, web = process(), process()
    worker.publish(1, ev.TextDelta(7, "Almost there"))
    assert web.live_state(1).text == "Almost there"
    worker.publish(1, ev.Done(7, "completed"))
    assert web.live_state(1) == LiveState()
    late = web.subscribe(1)
    assert late.snapshot == LiveState()
    assert late.snapshot.replay() == []


def test_a_new_run_replaces_the_state_of_one_that_never_finished(process):
    worker, web = process(), process()
    worker.publish(1, ev.TextDelta(7, "Interrupted repl"))
    worker.publish(1, ev.TextDelta(8, "A new answer"))
    assert web.live_state(1) == LiveState(8, "A new answer", [])


def test_person_events_reach_every_socket_of_that_person_in_any_process(process):
    worker, web_a, web_b = process(), process(), process()
    one, two, stranger = (
        web_a.subscribe(1, user_id=5),
        web_b.subscribe(2, user_id=5),
        web_b.subscribe(3, user_id=6),
    )
    changed = ev.ConversationChanged({"id": 1, "title": "Plan", "status": "STREAMING"})
    worker.publish_user(5, changed)
    assert one.get(timeout=2) == changed
    assert two.get(timeout=2) == changed
    later = ev.ConversationChanged({"id": 3, "title": "Theirs", "status": "IDLE"})
    worker.publish_user(6, later)  # published after: the stranger hears it first, or nothing
    assert stranger.get(timeout=scaled(2)) == later


def test_the_live_state_of_a_run_that_went_silent_expires(process):
    worker, web = process(live_ttl=1), process()
    worker.publish(1, ev.TextDelta(7, "and then the worker died"))
    assert web.live_state(1).run_id == 7
    eventually(lambda: web.live_state(1) == LiveState(), timeout=5)


def test_a_socket_open_across_an_expiry_still_gets_the_next_run(process, client, prefix):
    """The counter starts afresh after an expiry; a socket that has been open since must
    not mistake the new run's events for ones already in its snapshot."""
    worker, web = process(live_ttl=1), process()
    for n in range(50):
        worker.publish(1, ev.TextDelta(7, f"{n} "))
    socket = web.subscribe(1)
    assert socket.snapshot.run_id == 7
    eventually(lambda: not client.keys(f"{prefix}live:*"), timeout=5)
    worker.publish(1, ev.TextDelta(8, "next run"))
    assert socket.get(timeout=2) == ev.TextDelta(8, "next run")


def test_closing_a_socket_stops_delivery_and_its_channel(process, client, prefix):
    worker, web = process(), process()
    leaving, staying = web.subscribe(1, user_id=5), web.subscribe(1, user_id=5)
    leaving.close()
    worker.publish(1, ev.TextDelta(7, "still here?"))
    assert staying.get(timeout=2) == ev.TextDelta(7, "still here?")
    worker.publish(1, FENCE)  # handed on after the first event went to every receiver
    assert staying.get(timeout=scaled(2)) == FENCE
    assert leaving.drain() == []
    staying.close()
    assert web._by_conversation == {} and web._by_user == {}
    channels = [f"{prefix}conversation:1", f"{prefix}user:5"]
    eventually(lambda: all(count == 0 for _, count in client.pubsub_numsub(*channels)))


def test_a_run_publishes_with_no_socket_anywhere(process):
    worker = process()
    for event in A_RUN:
        worker.publish(1, event)
    worker.publish_user(5, ev.ConversationChanged({"id": 1, "status": "IDLE"}))
    assert worker.listener._thread is None  # a worker process never listens
    assert worker.live_state(1).text == "Here is your quiz."


def test_a_socket_that_never_reads_does_not_slow_the_others(process, monkeypatch):
    monkeypatch.setattr(hub_module, "QUEUE_SIZE", 100)
    worker, web = process(), process()
    stuck, reader = web.subscribe(1), web.subscribe(1)
    for n in range(500):
        worker.publish(1, ev.TextDelta(7, f"{n} "))
    worker.publish(1, ev.Done(7, "completed"))
    eventually(lambda: stuck.overflowed)  # its socket closes; the client catches up from rows
    received = []
    while not received or not isinstance(received[-1], ev.Done):
        received.append(reader.get(timeout=2))
        if len(received) == 100:
            received.extend(reader.drain())
            break
    assert len(received) == 100  # bounded per socket, and the reader keeps up meanwhile


def test_a_dropped_connection_is_reported_to_sockets_and_the_listener_comes_back(process, client):
    worker, web = process(), process()
    before = web.subscribe(1)
    worker.publish(1, ev.TextDelta(7, "before"))
    assert before.get(timeout=2) == ev.TextDelta(7, "before")

    (listener,) = [c for c in client.client_list() if c["name"] == web.listener_name]
    client.client_kill_filter(_id=listener["id"])

    # Events published while it was gone are lost: the socket is told to catch up.
    eventually(lambda: before.overflowed)
    eventually(lambda: any(c["name"] == web.listener_name for c in client.client_list()))
    after = web.subscribe(1)
    worker.publish(1, ev.TextDelta(7, " after"))
    assert after.get(timeout=2) == ev.TextDelta(7, " after")
    assert after.snapshot.text == "before"
    assert not after.overflowed


def test_a_batch_published_after_redis_lost_its_scripts_arrives_once(process, client):
    """A restarted Redis has no scripts: the batch that finds out is sent again once the
    script is loaded, and no event of it is published twice."""
    worker, web = process(), process()
    socket = web.subscribe(1)
    batch = [
        (1, ev.Timeline(7, "resolving_context", "started", detail=f"tool {n}")) for n in range(5)
    ]
    client.script_flush()

    # pipelined: several at once
    worker.publisher._send_batch([*batch, (1, ev.Done(7, "completed"))])

    assert until_done(socket) == [event for _, event in batch] + [ev.Done(7, "completed")]
    worker.publish(1, FENCE)  # after the batch and any event of it sent twice
    assert socket.get(timeout=scaled(2)) == FENCE
