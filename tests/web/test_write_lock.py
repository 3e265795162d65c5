"""SQLite has one write lock for the whole database. Reading (signing in with a token,
a socket checking whose chat it is) must not take it, and a request must not hold it
while it waits on something else, or every other writer of the process waits too."""

from __future__ import annotations

import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.accounts.models import ApiToken, User
from app.agents.catalog import load_agents
from app.chat.conversations import create_conversation
from app.db import read_transaction, utcnow
from app.workspace.models import Character, Offer, Persona
from tests.fake_model import Turn, schema_instance, text, tool_use
from tests.live import LiveServer, connect_socket
from tests.media import ImagesAPI
from tests.waiting import eventually


@pytest.fixture(autouse=True)
def sqlite_only(database_url):
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's database-wide write lock")


@pytest.fixture
def server(app):
    live = LiveServer(app).start()
    yield live
    live.stop()


def _sqlite_path(app) -> str:
    return app.extensions["database"].engine.url.database


class HeldWriteLock:
    """Another connection holding SQLite's write lock, as a long write would."""

    def __init__(self, app):
        self.connection = sqlite3.connect(_sqlite_path(app), isolation_level=None, timeout=0)

    def __enter__(self):
        self.connection.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, *_exc):
        self.connection.execute("ROLLBACK")
        self.connection.close()


def _person_with_chat(app) -> tuple[str, int]:
    with app.extensions["database"].session() as session:
        user = User(email="ada@example.com", password_hash="x", display_name="Ada")
        session.add(user)
        session.flush()
        token, raw = ApiToken.issue(user, "test")
        # Used a moment ago: signing in has nothing to write (it notes use once a minute).
        token.last_used_at = utcnow()
        session.add(token)
        chat = create_conversation(session, user.id)
        session.commit()
        return raw, chat.id


def test_a_read_transaction_neither_takes_nor_waits_for_the_write_lock(app):
    database = app.extensions["database"]
    raw, chat_id = _person_with_chat(app)
    with HeldWriteLock(app), database.session() as session:
        started = time.monotonic()
        with read_transaction(session):
            assert session.get(User, 1).email == "ada@example.com"
        assert time.monotonic() - started < 1.0
        assert not session.in_transaction()
    # And a writer is not refused because a reader is open.
    with database.session() as reader, read_transaction(reader):
        reader.get(User, 1)
        with database.session() as writer:
            writer.get(User, 1).display_name = "Ada L."
            writer.commit()


def test_a_socket_opens_while_another_writer_holds_the_lock(app, server):
    raw, chat_id = _person_with_chat(app)
    hub = app.extensions["services"].hub
    with HeldWriteLock(app):
        ws = connect_socket(
            f"{server.ws_url}/ws/chats/{chat_id}?format=json",
            headers={"Authorization": f"Bearer {raw}"},
        )
        try:
            # The socket checks whose chat it is, then subscribes to its frames.
            eventually(
                lambda: hub._by_conversation.get(chat_id),
                2.0,
                "the socket waited for another writer's lock",
            )
        finally:
            ws.close()


def test_a_started_run_is_handed_over_with_no_lock_held(app, client):
    """Handing the run to the executor may wait (a thread starting, a queue); meanwhile
    another writer must be able to take the lock."""
    raw, chat_id = _person_with_chat(app)
    executor = app.extensions["executor"]
    handed_over = []
    real_submit = executor.submit

    def submit(run_id):
        other = sqlite3.connect(_sqlite_path(app), isolation_level=None, timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            handed_over.append("lock free")
        except sqlite3.OperationalError as error:
            handed_over.append(str(error))
        finally:
            other.close()
        real_submit(run_id)

    executor.submit = submit
    response = client.post(
        f"/api/chats/{chat_id}/loop",
        json={"message": "hello"},
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert response.status_code == 202, response.get_data(as_text=True)
    assert handed_over == ["lock free"]


# --- slow tools: no transaction is open while a tool waits on a model or the network ---


def _lock_is_free(app) -> bool:
    """Whether another writer gets the lock within a second. The probe runs inside the
    slow call, so a tool holding the lock would hold it all that time; a short read
    elsewhere (the test polling its run) only delays the probe."""
    other = sqlite3.connect(_sqlite_path(app), isolation_level=None, timeout=1.0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


class Probe:
    """Tries to take the write lock from inside the slow call (the model server or the
    HTTP server answering the tool), i.e. exactly while the tool waits for it."""

    def __init__(self, app):
        self.app = app
        self.seen: list[bool] = []

    def __call__(self) -> None:
        self.seen.append(_lock_is_free(self.app))


class PageServer:
    """A web page on 127.0.0.1 for fetch_url; it probes the lock while it answers."""

    def __init__(self, probe: Probe):
        probe_ = probe

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                probe_()
                body = b"<html><head><title>Acme</title></head><body>Hello</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/about"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _workspace(app) -> tuple[str, int, dict[str, int]]:
    raw, chat_id = _person_with_chat(app)
    with app.extensions["database"].session() as session:
        offer = Offer(user_id=1, name="Calm Mornings", description="Coaching")
        session.add(offer)
        session.flush()
        persona = Persona(user_id=1, offer_id=offer.id, name="Busy founder")
        session.add(persona)
        session.flush()
        character = Character(user_id=1, persona_id=persona.id, name="Mira", description="40")
        session.add(character)
        session.commit()
        ids = {"offer": offer.id, "persona": persona.id, "character": character.id}
    return raw, chat_id, ids


SLOW_CALLS = {
    **{
        agent.tool_name: lambda ids: {"instructions": "Write it", "offer_id": ids["offer"]}
        for agent in load_agents()
    },
    "propose_cast_list": lambda ids: {"persona_id": ids["persona"], "offer_id": ids["offer"]},
    "generate_element_sheet": lambda ids: {"offer_id": ids["offer"]},
    "create_storyboard": lambda ids: {"offer_id": ids["offer"]},
    "remember": lambda ids: {"instruction": "I prefer short headlines"},
    "generate_image": lambda ids: {"prompt": "A calm morning", "offer_id": ids["offer"]},
    "generate_character_portrait": lambda ids: {"character_id": ids["character"]},
    "fetch_url": lambda ids: {"url": "(the page server)"},
}


@pytest.mark.parametrize("tool", sorted(SLOW_CALLS))
def test_no_slow_tool_holds_the_write_lock_while_it_waits(make_app, fake_model, tool):
    """Every tool that waits on a model or another server: while it waits, another writer
    can take SQLite's write lock (held, every other person's writes would stop)."""
    images = ImagesAPI().start()
    app = make_app(
        anthropic_base_url=fake_model.base_url,
        image_provider_url=images.url,
        fetch_allow_hosts=("127.0.0.1",),
    )
    probe = Probe(app)
    images.on_request = probe
    page = PageServer(probe)

    def model(body):
        if body.get("tool_choice", {}).get("type") == "tool":
            probe()
            forced = body["tools"][0]
            return Turn(tool_use(forced["name"], schema_instance(forced["input_schema"])))
        return Turn(text("Done."))

    fake_model.responder = model
    try:
        raw, chat_id, ids = _workspace(app)
        arguments = SLOW_CALLS[tool](ids)
        if tool == "fetch_url":
            arguments = {"url": page.url}
        fake_model.script(Turn(tool_use(tool, arguments)))
        client = app.test_client()
        headers = {"Authorization": f"Bearer {raw}"}
        response = client.post(
            f"/api/chats/{chat_id}/loop", json={"message": "Go"}, headers=headers
        )
        assert response.status_code == 202, response.get_json()
        run_id = response.get_json()["runId"]

        def ended():
            status = client.get(f"/api/runs/{run_id}", headers=headers).get_json()["status"]
            return status if status not in ("queued", "running") else None

        status = eventually(ended, 15, f"run {run_id} never ended")
    finally:
        images.stop()
        page.stop()

    assert probe.seen, f"{tool} never reached its slow call"
    assert all(probe.seen), f"{tool} held the write lock while it waited: {probe.seen}"
    if tool == "propose_cast_list":
        assert status == "awaiting", "the proposal waits on its confirmation card"
        return
    assert status == "completed"
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "is_error" not in result, result
