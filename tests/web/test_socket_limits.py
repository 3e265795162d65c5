"""Socket limits (app/web/sockets.py): at most MAX_SOCKETS_PER_PERSON open sockets per
person; catch-up answered a page at a time (SOCKET_CATCH_UP_ROWS, then a `more` frame)
and at most SOCKET_CATCH_UPS_PER_MINUTE times a minute per socket, SOCKET_CATCH_UP_BYTES_PER_MINUTE
bytes a minute per person; a malformed message
(`{"after": <huge>}`, bad JSON, NUL, nesting) answers an error frame, and the socket
goes on."""

from __future__ import annotations

import json
import re
import time

import pytest
import simple_websocket
from sqlalchemy import event

from app.chat.rows import insert_message
from tests.factories import add_conversation, add_token, add_user
from tests.live import LiveServer, connect_socket


@pytest.fixture
def app(make_app):
    return make_app(max_sockets_per_person=2, socket_catch_up_rows=2, socket_catch_ups_per_minute=4)


@pytest.fixture
def server(app):
    live = LiveServer(app).start()
    yield live
    live.stop()


@pytest.fixture
def person(app):
    user_id = add_user(app, "ada@example.com")
    _, raw = add_token(app, user_id)
    chat = add_conversation(app, user_id)
    with app.extensions["database"].session() as session:
        for n in range(1, 6):
            insert_message(
                session,
                chat,
                role="user",
                kind="user",
                content=f"row {n}",
                meta={"blocks": [{"type": "text", "text": f"row {n}"}]},
            )
        session.commit()
    return {"token": raw, "chat": chat}


def _connect(server, person, fmt="json"):
    query = "?format=json" if fmt == "json" else ""
    return connect_socket(
        f"{server.ws_url}/ws/chats/{person['chat']}{query}",
        headers={"Authorization": f"Bearer {person['token']}"},
    )


def _frames(ws, until_type="conversation") -> list[dict]:
    frames = []
    while True:
        frame = json.loads(ws.receive(timeout=5))
        frames.append(frame)
        if frame["type"] in (until_type, "error"):
            return frames


def test_the_socket_past_the_per_person_cap_is_refused_with_a_reason(server, person):
    first, second = _connect(server, person), _connect(server, person)
    try:
        for ws in (first, second):  # both serve: each answers a catch-up
            ws.send(json.dumps({"after": 4}))
            assert [f["type"] for f in _frames(ws)] == ["message", "conversation"]
        third = _connect(server, person)
        with pytest.raises(simple_websocket.ConnectionClosed) as closed:
            third.receive(timeout=5)
        assert closed.value.reason == 1013
        assert "at most 2 per person" in closed.value.message
        third.sock.close()
        second.close()
        # The client's reader ends on the server's close reply, sent once the server saw
        # the close: from then on the slot is free (not a second later, when the socket's
        # relay next looks up).
        second.thread.join(timeout=5)
        fourth = _connect(server, person)  # a slot freed is a slot to take, at once
        fourth.send(json.dumps({"after": 4}))
        assert _frames(fourth)[0]["type"] == "message"
        fourth.close()
    finally:
        first.close()


def test_catch_up_comes_a_page_at_a_time_and_the_client_asks_for_more(server, person):
    ws = _connect(server, person)
    try:
        ws.send(json.dumps({"after": 0}))
        page = _frames(ws)
        assert [f["type"] for f in page] == ["message", "message", "more", "conversation"]
        assert [f["row"]["content"] for f in page[:2]] == ["row 1", "row 2"]
        ws.send(json.dumps({"after": page[2]["after"]}))
        page = _frames(ws)
        assert [f.get("row", {}).get("content") for f in page[:2]] == ["row 3", "row 4"]
        ws.send(json.dumps({"after": page[2]["after"]}))
        page = _frames(ws)
        assert [f["type"] for f in page] == ["message", "conversation"]
        assert page[0]["row"]["content"] == "row 5"
    finally:
        ws.close()


@pytest.fixture
def stingy_server(make_app, app):
    """Another process of the same deployment, whose byte budget one answer spends."""
    stingy = make_app(
        create_schema=False, socket_catch_up_rows=2, socket_catch_up_bytes_per_minute=1
    )
    live = LiveServer(stingy).start()
    yield live
    live.stop()


def _inside_one_minute(margin: float = 15.0) -> None:
    """The byte budget counts in a sliding window whose minutes are the clock's: just past
    a minute's end the spent one already weighs less. Start well inside a minute (waits
    only in the last `margin` seconds of one: a slow machine's PostgreSQL pass took more
    than five between the first answer and the second ask)."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.05)


def test_catch_up_bytes_are_bounded_per_person_across_their_sockets(stingy_server, person):
    first, second = _connect(stingy_server, person), _connect(stingy_server, person)
    try:
        _inside_one_minute()  # once both are open: the window is the two asks alone
        first.send(json.dumps({"after": 0}))  # begun within the budget: sent whole
        assert [f["type"] for f in _frames(first)] == ["message", "message", "more", "conversation"]
        second.send(json.dumps({"after": 0}))
        assert _frames(second) == [
            {
                "type": "error",
                "code": "RATE_LIMITED",
                "message": "Too many catch-up bytes: at most 1 a minute per person.",
            }
        ]
        assert second.connected
    finally:
        first.close()
        second.close()


def test_nothing_changed_is_answered_without_reading_rows(app, server, person):
    """A client holding every row (the cheap answer a repeated catch-up gets): the title,
    and not one row read from the database."""
    read_rows = []

    def note(_conn, _cursor, statement, *_args):
        # The rows' table only: the chat's queue is read (a page coming back shows it as
        # it is now), a few short messages at most.
        if re.search(r"(?<!queued_)messages\.content", statement):
            read_rows.append(statement)

    engine = app.extensions["database"].engine
    event.listen(engine, "before_cursor_execute", note)
    ws = _connect(server, person)
    try:
        for _ in range(2):
            ws.send(json.dumps({"after": 5}))
            assert [f["type"] for f in _frames(ws)] == ["conversation"]
    finally:
        ws.close()
        event.remove(engine, "before_cursor_execute", note)
    assert read_rows == []


def test_catch_up_requests_past_the_rate_answer_an_error_frame(server, person):
    ws = _connect(server, person)
    try:
        for _ in range(4):
            ws.send(json.dumps({"after": 0}))
            assert _frames(ws)[0]["type"] == "message"
        ws.send(json.dumps({"after": 0}))
        frames = _frames(ws)
        assert frames == [
            {
                "type": "error",
                "code": "RATE_LIMITED",
                "message": "Too many catch-up requests: at most 4 a minute.",
            }
        ]
        assert ws.connected
    finally:
        ws.close()


@pytest.mark.parametrize(
    "message, says",
    [
        (json.dumps({"after": 10**30}), "'after' must be a whole number"),
        (json.dumps({"after": 2**63}), "'after' must be a whole number"),
        (json.dumps({"after": -1}), "'after' must be a whole number"),
        (json.dumps({"after": "3"}), "'after' must be a whole number"),
        ("{not json", "not valid JSON"),
        ('["after", 1]', "must be a JSON object"),
        ('{"after": 0, "branch": "a\\u0000"}', "NUL byte or invalid Unicode"),
        ('{"after": 0, "branch": "\\ud800"}', "NUL byte or invalid Unicode"),
        ('{"after": 0, "x": ' + "[" * 40 + "]" * 40 + "}", "nested deeper than 32"),
        ('{"after": 0, "x": ' + "[" * 30_000 + "]" * 30_000 + "}", "nested deeper"),
    ],
)
def test_a_malformed_message_answers_an_error_frame_and_the_socket_goes_on(
    server, person, message, says
):
    ws = _connect(server, person)
    try:
        ws.send(message)
        (frame,) = _frames(ws)
        assert frame["type"] == "error" and frame["code"] == "INVALID_INPUT"
        assert says in frame["message"]
        ws.send(json.dumps({"after": 4}))
        assert _frames(ws)[0]["row"]["content"] == "row 5"
    finally:
        ws.close()


def test_the_html_socket_answers_a_huge_after_with_a_banner(server, person):
    ws = _connect(server, person, fmt="html")
    try:
        ws.send(json.dumps({"after": 10**30}))
        frame = ws.receive(timeout=5)
        assert 'id="banner"' in frame and "must be a whole number" in frame
    finally:
        ws.close()


def test_the_html_socket_marks_a_cut_catch_up_for_the_page_to_continue(server, person):
    ws = _connect(server, person, fmt="html")
    try:
        ws.send(json.dumps({"after": 0}))
        frames = [ws.receive(timeout=5) for _ in range(3)]
        assert "row 1" in frames[0] and "row 2" in frames[0] and "row 3" not in frames[0]
        seq = frames[0].count('id="m-')
        assert seq == 2
        assert 'id="catch-up-more"' in frames[1] and 'data-after="2"' in frames[1]
    finally:
        ws.close()
