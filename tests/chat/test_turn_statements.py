"""What a run costs the database before its model call: statements and transactions from
the person's `POST` of a message to the request reaching the model (an operator-visible
regression guard: counted, not timed)."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import event

from app.chat.liveness import StreamWatch
from app.chat.stale import sweep
from tests.fake_model import Turn, text

# From `POST /api/chats/<id>/loop` to the model call, for the second message of a chat
# (nothing first-use about it), on SQLite and PostgreSQL alike: the request's login read,
# the turn's transaction, the run's claim, its first request and its iteration count.
# Issue 22 cut them from 27 (SQLite) and 28 (PostgreSQL) statements to 17 in 3
# transactions: the turn reads its conversation once (ownership, lock and allowance), the
# run in flight from the conversation's own row, the limits in one read, the attachments in
# one; the run's claim reads its state and its first request's history and counts its
# first iteration in one transaction. Issue 32 added one read to the claim: the person's
# MCP servers, whose pinned tools join the run's tool set.
# Issue 33 added two: the chat's project, read with the claim (the workspace its tools
# use), and the person's projects (the system prompt's project note, select_project).
# Issue 34 added one: the models offered (the chat's model sets the request's model,
# window and thinking budget: app/chat/model_choice.py).
# Issue 36 cut three statements and a transaction: the request signs in with the turn's
# own first read (the conversation locked, joined with the person and the token:
# app/web/identity.py), the claim reads the chat's whole row once (its project and preset
# with it), and the run's taint and the addresses the person typed come in one read.
MAX_STATEMENTS = 18
MAX_TRANSACTIONS = 2


# Threads that read on their own clock, not for the turn: the process's liveness monitor
# polls for stops from other processes while runs are in flight.
BACKGROUND_THREADS = {"liveness", "stale-sweeper"}


class StatementLog:
    def __init__(self, engine):
        self.engine = engine
        self.lock = threading.Lock()
        self.entries: list[tuple[float, str]] = []

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._statement)
        event.listen(self.engine, "begin", self._begin)
        return self

    def __exit__(self, *exc):
        event.remove(self.engine, "before_cursor_execute", self._statement)
        event.remove(self.engine, "begin", self._begin)

    def _statement(self, _conn, _cursor, statement, *_args):
        if threading.current_thread().name in BACKGROUND_THREADS:
            return
        with self.lock:
            if not statement.startswith("BEGIN"):  # SQLite's own BEGIN: the `begin` below
                self.entries.append((time.monotonic(), " ".join(statement.split())[:160]))

    def _begin(self, _conn):
        if threading.current_thread().name in BACKGROUND_THREADS:
            return
        with self.lock:
            self.entries.append((time.monotonic(), "-- begin"))

    def before(self, moment: float) -> list[str]:
        with self.lock:
            return [what for when, what in self.entries if when < moment]


def _model_called_at(fake_model) -> list[float]:
    """The moment each request reached the model (the fake server's own thread)."""
    moments: list[float] = []
    answer = fake_model._answer

    def noting(body):
        moments.append(time.monotonic())
        return answer(body)

    fake_model._answer = noting
    return moments


def test_a_message_reaches_the_model_within_the_statement_budget(app, chat, fake_model):
    fake_model.script(Turn(text("First.")), Turn(text("Second.")))
    chat_id = chat.new_chat("Counted")
    chat.wait(chat.send(chat_id, "Warm up"))
    moments = _model_called_at(fake_model)

    with StatementLog(app.extensions["database"].engine) as log:
        run_id = chat.send(chat_id, "Hello again")
        fake_model.wait_for_requests(2)
    chat.wait(run_id)

    assert moments, "the model was not called"
    before = log.before(moments[0])
    statements = [s for s in before if s != "-- begin"]
    transactions = len(before) - len(statements)
    listing = f"{len(statements)} statements, {transactions} transactions:\n" + "\n".join(before)
    assert len(statements) <= MAX_STATEMENTS, listing
    assert transactions <= MAX_TRANSACTIONS, listing


# The whole turn of a message the model answers in text, from the `POST` to the run's end:
# the statements before the model call, then the answer's row, the run's final status,
# its usage event, its log and its conversation's list item, written in one transaction.
# Issue 22 cut them from 44 statements in 7 transactions, on SQLite and PostgreSQL alike.
# 26, plus the claim's read of the person's MCP servers, plus issue 33's two and issue
# 34's one (above): 30 in 4. Issue 36 cut it to 26 in 3: the three above, and the list
# item, which the run's final update of its conversation returns.
MAX_TURN_STATEMENTS = 26
MAX_TURN_TRANSACTIONS = 3


def test_a_whole_turn_stays_within_the_statement_budget(app, chat, fake_model):
    fake_model.script(Turn(text("First.")), Turn(text("Second.")))
    chat_id = chat.new_chat("Counted")
    chat.wait(chat.send(chat_id, "Warm up"))

    with StatementLog(app.extensions["database"].engine) as log:
        run_id = chat.send(chat_id, "Hello again")
        # Waits for the run to end without a request of this test's own being counted.
        app.extensions["executor"].shutdown()

    assert chat.wait(run_id)["status"] == "completed"
    assert [row["content"] for row in chat.rows(chat_id)][-1] == "Second."
    entries = log.before(time.monotonic())
    statements = [s for s in entries if s != "-- begin"]
    transactions = len(entries) - len(statements)
    listing = f"{len(statements)} statements, {transactions} transactions:\n" + "\n".join(entries)
    assert len(statements) <= MAX_TURN_STATEMENTS, listing
    assert transactions <= MAX_TURN_TRANSACTIONS, listing


# Tables that stay small whatever the workspace's size: the operator's list of models.
SMALL_TABLES = {"offered_models"}
# Partial indexes, whose every entry is a row in a state that stays few (active runs).
FEW_ROWS_INDEXES = {"uq_runs_one_active_per_conversation"}
# A search that still reads every run the person ever had (the turn counts the ones in
# flight: by person and status).
EVERY_RUN_OF_A_PERSON = "(user_id=?)"


class PlanLog:
    """Every statement a turn sends (with its parameters), to be explained afterwards."""

    def __init__(self, engine, threads: set[str] | None = BACKGROUND_THREADS):
        self.engine = engine
        self.left_out = threads or set()  # threads whose statements are not the test's
        self.statements: list[tuple[str, object]] = []

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self._statement)
        return self

    def __exit__(self, *exc):
        event.remove(self.engine, "before_cursor_execute", self._statement)

    def _statement(self, _conn, _cursor, statement, parameters, _context, many):
        if not many and threading.current_thread().name not in self.left_out:
            self.statements.append((statement, parameters))

    def tables_read_whole(self) -> list[str]:
        """SQLite's plan for each statement: the tables it scans rather than searches, and
        searches of runs by person alone."""
        raw = self.engine.raw_connection()
        try:
            scans = []
            for statement, parameters in self.statements:
                if statement.startswith(("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT")):
                    continue
                plan = raw.cursor().execute(f"EXPLAIN QUERY PLAN {statement}", parameters)
                for *_ids, detail in plan.fetchall():
                    table = detail.split()[1] if detail.startswith("SCAN ") else None
                    if detail.split()[-1] in FEW_ROWS_INDEXES:
                        continue
                    every_run = detail.startswith("SEARCH runs ") and detail.endswith(
                        EVERY_RUN_OF_A_PERSON
                    )
                    if every_run or (table and table not in SMALL_TABLES and table != "CONSTANT"):
                        scans.append(f"{detail}: {' '.join(statement.split())[:120]}")
            return scans
        finally:
            raw.close()


def test_no_statement_of_a_turn_or_a_stop_reads_a_whole_table(app, chat, fake_model):
    """A turn's cost must not grow with the workspace: every statement finds its rows by an
    index (SQLite's query plan; PostgreSQL's planner rightly scans a test's tiny tables).
    A run's end found its conversation by `active_run_id`, which has no index: every
    conversation of every person was read at every run's end; the count of the person's
    runs in flight read every run they ever had."""
    if app.extensions["database"].engine.dialect.name != "sqlite":
        pytest.skip("SQLite's query plan is the one read here")
    release = threading.Event()
    fake_model.script(Turn(text("First.")), Turn(text("Second.")))
    chat_id = chat.new_chat("Planned")
    chat.wait(chat.send(chat_id, "Warm up"))

    with PlanLog(app.extensions["database"].engine) as log:
        chat.wait(chat.send(chat_id, "Hello again"))
        fake_model.responder = lambda _body: release.wait(20) and Turn(text("Late."))
        held = chat.send(chat_id, "And once more")
        fake_model.wait_for_requests(3)
        stopped = chat.post(f"/api/chats/{chat_id}/stop", {})
        release.set()
        assert stopped.status_code == 200 and stopped.get_json()["runId"] == held
        assert chat.wait(held)["status"] == "cancelled"

    assert log.statements, "no statement was seen"
    assert log.tables_read_whole() == []


def test_what_every_process_does_in_the_background_reads_no_whole_table(app, chat, fake_model):
    """Each process beats for its runs every few seconds and sweeps for stale ones every
    half minute; a chat's page reads its context gauge; a deleted chat leaves its usage
    events. None of them may read a table whole (the beat found conversations by
    `active_run_id`, the sweep read every run and every conversation, the gauge and the
    delete every usage event)."""
    if app.extensions["database"].engine.dialect.name != "sqlite":
        pytest.skip("SQLite's query plan is the one read here")
    services = app.extensions["services"]
    fake_model.script(Turn(text("First.")))
    chat_id = chat.new_chat("Background")
    run_id = chat.send(chat_id, "Hello")
    chat.wait(run_id)
    gone = chat.new_chat("To delete")

    with PlanLog(services.database.engine, threads=None) as log:
        services.liveness.beat([StreamWatch(run_id, chat_id, time.monotonic())])
        assert sweep(services.database, services.hub, 1, orphans=False) == []
        assert chat.client.get(f"/chats/{chat_id}").status_code == 200
        deleted = chat.post("/api/chats/bulk", {"ids": [gone], "action": "delete"})
        assert deleted.status_code == 200

    assert log.statements, "no statement was seen"
    assert log.tables_read_whole() == []
