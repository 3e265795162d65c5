"""Through the app with REDIS_URL set: a run executing in one web process streams to sockets
on another (same database, same Redis), including a socket that joins mid-run and a card
pause answered through the other process."""

from __future__ import annotations

import json
import time

import pytest

from app.accounts.models import ApiToken
from app.accounts.service import create_user
from app.stream.redis_hub import RedisHub
from tests.factories import PASSWORD, REDIS_URL, needs_redis
from tests.fake_model import Turn, text, tool_use
from tests.live import LiveServer, connect_socket, wait_subscribed
from tests.waiting import eventually, scaled

pytestmark = needs_redis


class Process:
    """One web process: its app, served for real (sockets need it), driven with a token."""

    def __init__(self, app, token):
        self.app = app
        self.token = token
        self.server = LiveServer(app).start()
        self.client = app.test_client()

    def post(self, url, body):
        response = self.client.post(
            url, json=body, headers={"Authorization": f"Bearer {self.token}"}
        )
        assert response.status_code in (201, 202), response.get_json()
        return response.get_json()

    def rows(self, chat_id):
        response = self.client.get(
            f"/api/chats/{chat_id}/messages", headers={"Authorization": f"Bearer {self.token}"}
        )
        return response.get_json()["messages"]

    def socket(self, chat_id):
        ws = connect_socket(
            f"{self.server.ws_url}/ws/chats/{chat_id}?format=json",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        wait_subscribed(self.app, chat_id)
        return ws

    def html_socket(self, chat_id):
        """The page's socket (HTML fragments); it says which rows it holds, as app.js does."""
        ws = connect_socket(
            f"{self.server.ws_url}/ws/chats/{chat_id}",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        ws.send(json.dumps({"after": 0}))
        return ws

    def live_text(self, chat_id) -> str:
        return self.app.extensions["services"].hub.live_state(chat_id).text


@pytest.fixture
def processes(make_app, fake_model):
    apps = [make_app(anthropic_base_url=fake_model.base_url, redis_url=REDIS_URL) for _ in "ab"]
    with apps[0].extensions["database"].session() as session:
        user = create_user(session, "ada@example.com", PASSWORD)
        token, raw = ApiToken.issue(user, "test")
        session.add(token)
        session.commit()
    started = [Process(app, raw) for app in apps]
    yield started
    for process in started:
        process.server.stop()


def frames_until_done(ws, timeout=15.0) -> list[dict]:
    frames = []
    deadline = time.monotonic() + scaled(timeout)
    try:
        while time.monotonic() < deadline:
            raw = ws.receive(timeout=0.5)
            if raw is None:
                continue
            frames.append(json.loads(raw))
            if frames[-1]["type"] == "done":
                return frames
    finally:
        ws.close()
    raise TimeoutError(frames)


def streamed_text(frames) -> str:
    return "".join(f["text"] for f in frames if f["type"] == "textDelta")


def test_a_run_in_one_process_streams_to_sockets_on_another(processes, fake_model):
    a, b = processes
    assert all(isinstance(p.app.extensions["services"].hub, RedisHub) for p in processes)
    words = " ".join(f"word{n}" for n in range(40))
    fake_model.script(Turn(text(words), token_delay=0.03))
    chat_id = a.post("/api/chats", {})["id"]
    watching = b.socket(chat_id)

    run_id = a.post(f"/api/chats/{chat_id}/loop", {"message": "hi"})["runId"]
    eventually(lambda: len(b.live_text(chat_id)) >= 30, 10, "process b never saw the run's text")
    joining = b.socket(chat_id)  # mid-run, on the process that is not running it

    full, late = frames_until_done(watching), frames_until_done(joining)

    assert full[0]["type"] == "message" and full[0]["row"]["kind"] == "user"
    assert streamed_text(full) == words
    host_rows = [f["row"] for f in full if f["type"] == "message" and f["row"]["kind"] == "host"]
    assert host_rows[0]["content"] == words
    assert full[-1] == {"type": "done", "runId": run_id, "status": "completed"}
    assert late[0]["type"] == "textDelta" and late[0]["text"].startswith("word0 word1")
    assert streamed_text(late) == words  # nothing missed, nothing twice
    assert late[-1] == full[-1]
    assert b.live_text(chat_id) == ""  # the run is over: no live state left behind
    assert [r["kind"] for r in b.rows(chat_id)] == ["user", "host"]


def test_a_card_pause_answered_through_the_other_process(processes, fake_model):
    a, b = processes
    fake_model.script(
        Turn(
            text("Quick question."),
            tool_use(
                "ask_user",
                {"question": "Tone?", "options": [{"label": "Warm", "value": "warm"}]},
                id="toolu_tone",
            ),
        ),
        Turn(text("Warm it is."), token_delay=0.01),
    )
    chat_id = a.post("/api/chats", {})["id"]
    on_a = a.socket(chat_id)

    b.post(f"/api/chats/{chat_id}/loop", {"message": "Write me a tagline"})
    paused = frames_until_done(on_a)
    cards = [f for f in paused if f["type"] == "toolCall"]
    assert cards and cards[0]["toolUseId"] == "toolu_tone"
    assert paused[-1]["status"] == "awaiting"

    on_a = a.socket(chat_id)
    b.post(
        f"/api/chats/{chat_id}/loop",
        {"toolResponse": {"toolUseId": "toolu_tone", "result": {"value": "warm"}}},
    )
    resumed = frames_until_done(on_a)
    assert streamed_text(resumed) == "Warm it is."
    assert resumed[-1]["status"] == "completed"
    rows = a.rows(chat_id)
    assert [r["kind"] for r in rows] == ["user", "card", "host"]
    assert rows[1]["card"]["status"] == "answered"


def test_a_page_joining_mid_run_on_another_process_sees_the_same_rendered_text(
    processes, fake_model
):
    """The live text is rendered from the live state each process rebuilds from Redis: a
    page joining mid-run on the other process gets the rendered Markdown so far."""
    from app.web.live_text import LiveText

    a, b = processes
    reply = "## Plan\n\n| Step | Owner |\n|---|---|\n| Draft | Ada |\n\n" + " ".join(
        f"word{n}" for n in range(60)
    )
    fake_model.script(Turn(text(reply), token_delay=0.03))
    chat_id = a.post("/api/chats", {})["id"]
    a.post(f"/api/chats/{chat_id}/loop", {"message": "hi"})
    eventually(lambda: "word3" in b.live_text(chat_id), 10, "process b never saw the run's text")

    joining = b.html_socket(chat_id)
    try:
        opening = joining.receive(timeout=5)
        frames = [opening]
        deadline = time.monotonic() + scaled(15)
        while 'id="composer" class="composer"' not in frames[-1]:
            assert time.monotonic() < deadline
            frames.append(joining.receive(timeout=5) or "")
    finally:
        joining.close()
    text_then = reply[: reply.index("word3")]
    assert 'id="live-md-done"' in opening and "<th>Owner</th>" in opening
    assert "<h4>Plan</h4>" in opening and "|---" not in opening
    with b.app.test_request_context():
        expected = LiveText().parts(text_then)["done"]
    assert str(expected) in opening  # the stable blocks, exactly as rendered anywhere
    assert any("word59" in frame for frame in frames[1:])
