"""SQLite has one write lock for the whole database. Reading (signing in with a token,
a socket checking whose chat it is) must not take it, and a request must not hold it
while it waits on something else, or every other writer of the process waits too."""

from __future__ import annotations

import sqlite3
import time

import pytest
import simple_websocket

from app.accounts.models import ApiToken, User
from app.chat.conversations import create_conversation
from app.db import read_transaction, utcnow
from tests.live import LiveServer


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
        ws = simple_websocket.Client.connect(
            f"{server.ws_url}/ws/chats/{chat_id}?format=json",
            headers={"Authorization": f"Bearer {raw}"},
        )
        try:
            # The socket checks whose chat it is, then subscribes to its frames.
            deadline = time.monotonic() + 2.0
            while not hub._by_conversation.get(chat_id) and time.monotonic() < deadline:
                time.sleep(0.01)
            subscribed = bool(hub._by_conversation.get(chat_id))
        finally:
            ws.close()
    assert subscribed, "the socket waited for another writer's lock"


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
