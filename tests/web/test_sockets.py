"""The chat socket: who may connect, and what JSON clients receive."""

from __future__ import annotations

import json
import time

import pytest
import simple_websocket

from app.accounts.models import ApiToken
from app.chat.conversations import create_conversation
from app.chat.models import Conversation
from app.web.sockets import BAD_TOKEN, NO_CREDENTIALS, NO_SUCH_CHAT
from tests.fake_model import Turn, text
from tests.live import LiveServer, connect_socket, wait_subscribed
from tests.waiting import eventually, scaled


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


@pytest.fixture
def server(app):
    live = LiveServer(app).start()
    # simple_websocket's client sends a Host header without the port, which a browser
    # never does: the app is told where it lives, as a deployment's PUBLIC_URL would.
    app.config["LOOPDESK"] = app.config["LOOPDESK"].model_copy(update={"public_url": live.url})
    yield live
    live.stop()


def _token(app, user_id):
    with app.extensions["database"].session() as session:
        from app.accounts.models import User

        token, raw = ApiToken.issue(session.get(User, user_id), "test")
        session.add(token)
        session.commit()
        return raw


def _chat(app, user_id):
    with app.extensions["database"].session() as session:
        conversation = create_conversation(session, user_id)
        session.commit()
        return conversation.id


def _connect(server, chat_id, token=None, origin=None, fmt="json", cookie=None):
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if origin:
        headers["Origin"] = origin
    if cookie:
        headers["Cookie"] = cookie
    query = "?format=json" if fmt == "json" else ""
    return connect_socket(f"{server.ws_url}/ws/chats/{chat_id}{query}", headers=headers)


def _frames_until_done(ws, timeout=10.0):
    frames = []
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        raw = ws.receive(timeout=0.5)
        if raw is None:
            continue
        frame = json.loads(raw)
        frames.append(frame)
        if frame["type"] == "done":
            return frames
    raise TimeoutError(frames)


def _start_run(server, token, chat_id, message="hi"):
    import urllib.request

    request = urllib.request.Request(
        f"{server.url}/api/chats/{chat_id}/loop",
        data=json.dumps({"message": message}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)["runId"]


def test_json_socket_streams_a_run(app, server, auth, fake_model):
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    fake_model.script(Turn(text("Streaming over the socket works."), token_delay=0.01))
    ws = _connect(server, chat_id, token=token)
    wait_subscribed(app, chat_id)
    try:
        run_id = _start_run(server, token, chat_id)
        frames = _frames_until_done(ws)
    finally:
        ws.close()
    types = [f["type"] for f in frames]
    assert types[0] == "message" and frames[0]["row"]["kind"] == "user"
    deltas = "".join(f["text"] for f in frames if f["type"] == "textDelta")
    assert deltas == "Streaming over the socket works."
    assert all(f["runId"] == run_id for f in frames if f["type"] in ("textDelta", "done"))
    host_rows = [f["row"] for f in frames if f["type"] == "message" and f["row"]["kind"] == "host"]
    assert host_rows[0]["content"] == "Streaming over the socket works."
    assert frames[-1] == {"type": "done", "runId": run_id, "status": "completed"}


def test_a_socket_joining_mid_run_gets_the_text_so_far(app, server, auth, fake_model):
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    words = " ".join(f"word{n}" for n in range(40))
    fake_model.script(Turn(text(words), token_delay=0.03))
    _start_run(server, token, chat_id)
    hub = app.extensions["services"].hub
    eventually(lambda: len(hub.live_state(chat_id).text) >= 30, 5, "the text never flowed")
    ws = _connect(server, chat_id, token=token)
    try:
        frames = _frames_until_done(ws)
    finally:
        ws.close()
    first = frames[0]
    assert first["type"] == "textDelta" and first["text"].startswith("word0 word1")
    assert "".join(f["text"] for f in frames if f["type"] == "textDelta") == words


def test_a_json_socket_joining_mid_run_is_answered_while_the_run_streams(
    app, server, auth, fake_model
):
    """The socket reads the client's messages on every turn, not only when the stream
    goes quiet: a catch-up asked mid-run is answered before the run ends."""
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    words = " ".join(f"word{n}" for n in range(150))
    fake_model.script(Turn(text(words), token_delay=0.03))  # a delta every 30 ms
    _start_run(server, token, chat_id)
    hub = app.extensions["services"].hub
    # Join while the text flows: not in the quiet before it.
    eventually(lambda: len(hub.live_state(chat_id).text) >= 60, 20, "the text never flowed")
    ws = _connect(server, chat_id, token=token)
    try:
        ws.send(json.dumps({"after": 0}))
        frames = _frames_until_done(ws, timeout=30)
    finally:
        ws.close()
    types = [f["type"] for f in frames]
    # The user's row (published before this socket joined) comes only from the catch-up.
    caught_up = types.index("message")
    assert frames[caught_up]["row"]["kind"] == "user"
    assert "textDelta" in types[caught_up:-1]  # answered while the text still streamed


# simple_websocket's client leaks its socket when a handshake is refused.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize(
    "origin", ["http://evil.example", "https://127.0.0.1.evil.example", "null"]
)
def test_a_socket_from_another_origin_is_refused_before_upgrade(app, server, auth, origin):
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    with pytest.raises(simple_websocket.ConnectionError):
        _connect(server, chat_id, token=token, origin=origin)


def test_a_socket_from_the_same_origin_is_accepted(app, server, auth):
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    ws = _connect(server, chat_id, token=token, origin=server.url)
    assert ws.connected
    ws.close()


def _closed_with_policy(server, chat_id, why: str, token=None):
    """Refused: nothing is sent, the socket is closed with the policy code and a reason
    the client can show (docs/CONTRACT.md lists them)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    ws = connect_socket(f"{server.ws_url}/ws/chats/{chat_id}?format=json", headers=headers)
    received = []
    deadline = time.monotonic() + scaled(15)
    with pytest.raises(simple_websocket.ConnectionClosed) as closed:
        while time.monotonic() < deadline:
            message = ws.receive(timeout=0.5)
            if message is not None:
                received.append(message)
    assert received == []  # nothing before the close
    assert (closed.value.reason, closed.value.message) == (1008, why)


def test_a_socket_without_a_session_is_closed_and_sent_nothing(app, server, auth):
    chat_id = _chat(app, auth.create())
    _closed_with_policy(server, chat_id, NO_CREDENTIALS)


def test_a_socket_for_someone_elses_chat_is_closed_and_sent_nothing(app, server, auth):
    owner = auth.create()
    chat_id = _chat(app, owner)
    intruder_token = _token(app, auth.create("eve@example.com"))
    _closed_with_policy(server, chat_id, NO_SUCH_CHAT, token=intruder_token)
    # The same words for a chat that does not exist: never which.
    _closed_with_policy(server, chat_id + 100, NO_SUCH_CHAT, token=intruder_token)


def test_a_socket_with_a_revoked_or_bad_token_is_closed(app, server, auth):
    chat_id = _chat(app, auth.create())
    _closed_with_policy(server, chat_id, BAD_TOKEN, token="ld_not-a-real-token")


def test_a_session_cookie_works_on_the_socket(app, server, auth, client):
    chat_id = _chat(app, auth.create())
    auth.login()
    cookie = f"session={client.get_cookie('session').value}"
    ws = _connect(server, chat_id, cookie=cookie, origin=server.url)
    assert ws.connected
    try:
        wait_subscribed(app, chat_id)  # accepted, and following the chat
        ws.send(json.dumps({"after": 0}))
        frames = [json.loads(ws.receive(timeout=scaled(5)))]
        while frames[-1]["type"] not in ("conversation", "error"):
            frames.append(json.loads(ws.receive(timeout=scaled(5))))
    finally:
        ws.close()
    # Nothing to say until asked: its first words are the catch-up's answer.
    assert [f["type"] for f in frames] == ["conversation"], frames


def test_a_client_catches_up_by_saying_which_rows_it_holds(app, server, auth, fake_model):
    from app.chat.rows import insert_message

    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    with app.extensions["database"].session() as session:
        for n in range(1, 4):
            insert_message(
                session,
                chat_id,
                role="user",
                kind="user",
                content=f"row {n}",
                meta={"blocks": [{"type": "text", "text": f"row {n}"}]},
            )
        session.commit()
    ws = _connect(server, chat_id, token=token)
    try:
        ws.send(json.dumps({"after": 1}))
        frames = [json.loads(ws.receive(timeout=3)) for _ in range(2)]
    finally:
        ws.close()
    assert [f["row"]["content"] for f in frames] == ["row 2", "row 3"]
    assert all(f["type"] == "message" for f in frames)


def test_a_catch_up_on_a_quiet_chat_is_answered_without_waiting_for_an_event(
    app, server, auth, monkeypatch
):
    """The socket waits on its subscription between events; a client's message rings it
    (it used to be read only at the next event or after the wait: a second on a quiet
    chat). The wait is made far longer than the test's patience to show the difference."""
    from app.chat.rows import insert_message
    from app.web import sockets

    monkeypatch.setattr(sockets, "WAIT_SECONDS", 120.0)
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    with app.extensions["database"].session() as session:
        insert_message(session, chat_id, role="user", kind="user", content="the only row")
        session.commit()
    ws = _connect(server, chat_id, token=token)
    try:
        wait_subscribed(app, chat_id)
        ws.send(json.dumps({"after": 0}))
        frames = [json.loads(ws.receive(timeout=scaled(10))) for _ in range(2)]
    finally:
        ws.close()
    assert frames[0]["type"] == "message" and frames[0]["row"]["content"] == "the only row"
    assert frames[1]["type"] == "conversation"


def test_closing_the_socket_unsubscribes_it(app, server, auth):
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    ws = _connect(server, chat_id, token=token)
    wait_subscribed(app, chat_id)
    ws.close()
    hub = app.extensions["services"].hub
    eventually(lambda: not hub._by_conversation.get(chat_id), 5, "the socket stayed subscribed")


def test_the_html_socket_sends_the_live_text_rendered_a_few_times_a_second(
    app, server, auth, fake_model
):
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    reply = "## Plan\n\n| Step | Owner |\n|---|---|\n| Draft | Ada |\n\n" + " ".join(
        f"word{n}" for n in range(60)
    )
    fake_model.script(Turn(text(reply), token_delay=0.02))
    ws = _connect(server, chat_id, token=token, fmt="html")
    ws.send(json.dumps({"after": 0}))
    wait_subscribed(app, chat_id)
    frames = []
    try:
        started = time.monotonic()
        _start_run(server, token, chat_id)
        while time.monotonic() - started < scaled(15):
            raw = ws.receive(timeout=0.5)
            if raw is not None:
                frames.append((time.monotonic(), raw))
                if 'data-state="idle" data-version="3"' in raw:  # run 1 ended
                    break
    finally:
        ws.close()
    live = [(at, raw) for at, raw in frames if "live-md-tail" in raw or "live-md-done" in raw]
    assert live, frames
    assert not any("beforeend:#live-text" in raw for _, raw in frames)  # no raw text appended
    seconds = live[-1][0] - live[0][0]
    assert len(live) <= seconds / 0.2 + 3
    assert any("<table>" in raw and "<th>Owner</th>" in raw for _, raw in live)
    assert any("<h4>Plan</h4>" in raw for _, raw in live)
    assert all("|---" not in raw and "## " not in raw for _, raw in live)


def test_a_page_whose_socket_opens_late_still_gets_the_current_title(app, server, auth):
    """A title given (by the model or a rename elsewhere) before this page's socket was
    open reaches its header and list with the catch-up, not only with the live frame."""
    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    with app.extensions["database"].session() as session:
        session.get(Conversation, chat_id).title = "Spring launch ideas"
        session.commit()
    ws = _connect(server, chat_id, token=token, fmt="html")
    try:
        ws.send(json.dumps({"after": 0}))
        received = ""
        deadline = time.monotonic() + scaled(3)
        while 'id="chat-title"' not in received and time.monotonic() < deadline:
            received += ws.receive(timeout=scaled(3)) or ""
    finally:
        ws.close()
    assert '<h1 id="chat-title" hx-swap-oob="true">Spring launch ideas</h1>' in received
    # The socket watches this chat: its list item stays marked as the one open.
    assert (
        f'<li id="conv-{chat_id}" class="conversation-item current" data-group="recent"'
        ' hx-swap-oob="true">' in received
    )
    assert 'aria-current="page"' in received


def _html_until(ws, needle: str, timeout: float = 10.0) -> str:
    received = ""
    deadline = time.monotonic() + scaled(timeout)
    while needle not in received:
        assert time.monotonic() < deadline, received
        received += ws.receive(timeout=0.5) or ""
    return received


def test_the_html_socket_says_the_runs_state_with_a_version_and_again_on_reconnect(
    app, server, auth, fake_model
):
    """The composer follows the run as the database has it: answering while it runs, the
    card once it pauses on one (version 2 × run id + 1), and a socket that connects
    afterwards (a reconnect) is told the same in its catch-up."""
    from tests.fake_model import tool_use

    user_id = auth.create()
    token, chat_id = _token(app, user_id), _chat(app, user_id)
    options = [{"label": "Red", "value": "red"}, {"label": "Blue", "value": "blue"}]
    fake_model.script(
        Turn(text("Which?"), tool_use("ask_user", {"question": "Colour?", "options": options}))
    )
    ws = _connect(server, chat_id, token=token, fmt="html")
    try:
        ws.send(json.dumps({"after": 0}))
        assert 'data-state="idle" data-version="0"' in _html_until(ws, 'id="composer"')
        wait_subscribed(app, chat_id)
        run_id = _start_run(server, token, chat_id)
        received = _html_until(ws, 'data-state="card"')
    finally:
        ws.close()
    assert f'data-state="card" data-version="{2 * run_id + 1}"' in received
    assert "button" in received and 'class="stop"' not in received.split('data-state="card"')[1]
    again = _connect(server, chat_id, token=token, fmt="html")
    try:
        again.send(json.dumps({"after": 0}))
        caught_up = _html_until(again, 'id="composer"')
    finally:
        again.close()
    assert f'data-state="card" data-version="{2 * run_id + 1}"' in caught_up
