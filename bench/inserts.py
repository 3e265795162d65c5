"""Message-row inserts per second through the central path, against a plain INSERT.

Central path: `app.chat.rows.insert_message` (sequence = max+1 inside the INSERT, the
row returned; on PostgreSQL the conversation row is locked first).
Plain INSERT (the floor): one Core `INSERT INTO messages` statement, built once, run with
the same row's values, the sequence taken from a per-writer block of numbers computed in
Python: no max+1, no lock, nothing returned.

Every writer thread appends to ONE conversation (the contended case) and commits each row
in its own transaction. After every case the conversation's sequences must be exactly
1..total, with no gap and no duplicate; anything else raises `SequenceCheckError`.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, insert, make_url, select, text
from sqlalchemy.exc import SQLAlchemyError

from app.chat.rows import insert_message
from app.db import Database, utcnow
from app.models import Base, Conversation, Message, User

NAME = "inserts"
WRITER_COUNTS = (1, 8)
ROWS_PER_WRITER = 500
QUICK_ROWS_PER_WRITER = 50
POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
PATHS = ("central", "plain")


class SequenceCheckError(AssertionError):
    """The rows of a case are not numbered exactly 1..total."""


# --- the two write paths -------------------------------------------------------------------

Writer = Callable[[Database, int, int, int], None]


def _row(writer: int, index: int) -> dict:
    return {
        "role": "user",
        "kind": "user",
        "content": f"benchmark row {index} from writer {writer}",
        "meta": {"writer": writer, "index": index},
    }


def write_central(db: Database, conversation_id: int, writer: int, rows: int) -> None:
    with db.session() as session:
        for index in range(rows):
            insert_message(session, conversation_id, **_row(writer, index))
            session.commit()


PLAIN_INSERT = insert(Message.__table__)


def write_plain(db: Database, conversation_id: int, writer: int, rows: int) -> None:
    first = writer * rows + 1  # this writer's block of sequences: first .. first+rows-1
    with db.session() as session:
        for index in range(rows):
            session.execute(
                PLAIN_INSERT,
                {
                    "conversation_id": conversation_id,
                    "sequence": first + index,
                    "created_at": utcnow(),
                    **_row(writer, index),
                },
            )
            session.commit()


WRITERS: dict[str, Writer] = {"central": write_central, "plain": write_plain}


# --- one case ------------------------------------------------------------------------------


def new_conversation(db: Database, user_id: int) -> int:
    with db.session() as session:
        conversation = Conversation(user_id=user_id, title="benchmark")
        session.add(conversation)
        session.commit()
        return conversation.id


def warm_pool(db: Database, connections: int) -> None:
    """Open the connections the writers will check out, so timing excludes connecting."""
    opened = [db.engine.connect() for _ in range(connections)]
    for connection in opened:
        connection.close()


def time_case(db: Database, write: Writer, conversation_id: int, writers: int, rows: int) -> float:
    """Run `writers` threads of `rows` inserts each; return the wall-clock seconds."""
    start = threading.Barrier(writers + 1)
    errors: list[BaseException] = []

    def work(writer: int) -> None:
        try:
            start.wait()
            write(db, conversation_id, writer, rows)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(writers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"{len(errors)} writer thread(s) failed") from errors[0]
    return elapsed


def check_sequences(db: Database, conversation_id: int, total: int, label: str) -> None:
    with db.session() as session:
        sequences = session.scalars(
            select(Message.sequence)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.sequence)
        ).all()
    if sequences == list(range(1, total + 1)):
        return
    counts = Counter(sequences)
    duplicates = sorted(seq for seq, n in counts.items() if n > 1)
    missing = sorted(set(range(1, total + 1)) - counts.keys())
    extra = sorted(seq for seq in counts if not 1 <= seq <= total)
    raise SequenceCheckError(
        f"{label}: expected sequences 1..{total}, got {len(sequences)} rows; "
        f"missing {missing[:10]}{'...' if len(missing) > 10 else ''}, "
        f"duplicated {duplicates[:10]}, out of range {extra[:10]}"
    )


# --- databases -----------------------------------------------------------------------------


@contextmanager
def sqlite_database() -> Iterator[tuple[Database, str]]:
    with tempfile.TemporaryDirectory(prefix="loopdesk-bench-") as directory:
        db = Database(f"sqlite:///{Path(directory) / 'bench.db'}", pool_size=10, max_overflow=10)
        try:
            with db.engine.connect() as connection:
                mode = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
            if str(mode).lower() != "wal":
                raise RuntimeError(f"SQLite is not in WAL mode (journal_mode={mode})")
            yield db, f"SQLite {sqlite3.sqlite_version} (temp file, WAL)"
        finally:
            db.dispose()


class Unreachable(Exception):
    pass


@contextmanager
def postgres_database(url: str) -> Iterator[tuple[Database, str]]:
    """A fresh schema for the run, dropped afterwards. Raises `Unreachable` if no server."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            version = connection.execute(text("SHOW server_version")).scalar()
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    except (SQLAlchemyError, OSError) as error:
        admin.dispose()
        raise Unreachable(str(error).strip().splitlines()[0]) from error
    scoped = make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})
    db = Database(scoped.render_as_string(hide_password=False))
    try:
        yield db, f"PostgreSQL {version} (schema {schema})"
    finally:
        db.dispose()
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def open_database(name: str):
    if name == "sqlite":
        return sqlite_database()
    if name == "postgresql":
        return postgres_database(POSTGRES_URL)
    raise ValueError(f"unknown database {name!r}")


def bench_database(name: str, rows: int) -> tuple[list[dict], str]:
    cases = []
    with open_database(name) as (db, description):
        Base.metadata.create_all(db.engine)
        with db.session() as session:
            user = User(email="bench@example.com", password_hash="-", display_name="bench")
            session.add(user)
            session.commit()
            user_id = user.id
        warm_pool(db, max(WRITER_COUNTS))
        # Warm-up: a few rows through each path, in a conversation of their own.
        warm_up = new_conversation(db, user_id)
        write_central(db, warm_up, 0, 5)
        write_plain(db, new_conversation(db, user_id), 0, 5)

        for writers in WRITER_COUNTS:
            total = writers * rows
            case = {"database": name, "writers": writers, "rows": total}
            for path in PATHS:
                conversation_id = new_conversation(db, user_id)
                seconds = time_case(db, WRITERS[path], conversation_id, writers, rows)
                check_sequences(db, conversation_id, total, f"{name}, {writers} writers, {path}")
                case[f"{path}_seconds"] = round(seconds, 4)
                case[f"{path}_rows_per_s"] = round(total / seconds, 1)
            case["ratio"] = round(case["plain_rows_per_s"] / case["central_rows_per_s"], 2)
            case["sequence_check"] = "passed"
            cases.append(case)
    return cases, description


# --- entry points --------------------------------------------------------------------------


def run(
    *, quick: bool = False, databases=("sqlite", "postgresql"), rows: int | None = None, **_options
):
    rows = rows or (QUICK_ROWS_PER_WRITER if quick else ROWS_PER_WRITER)
    result = {
        "name": NAME,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "rows_per_writer": rows,
        "writer_counts": list(WRITER_COUNTS),
        "python": platform.python_version(),
        "databases": {},
        "skipped": {},
        "cases": [],
    }
    for name in databases:
        try:
            cases, description = bench_database(name, rows)
        except Unreachable as error:
            where = make_url(POSTGRES_URL).render_as_string(hide_password=True)
            print(f"PostgreSQL unreachable at {where} ({error}); skipping PostgreSQL.", flush=True)
            result["skipped"][name] = f"unreachable: {error}"
            continue
        result["databases"][name] = description
        result["cases"].extend(cases)
    return result


COLUMNS = (
    ("database", "database"),
    ("writers", "writers"),
    ("central path rows/s", "central_rows_per_s"),
    ("plain insert rows/s", "plain_rows_per_s"),
    ("ratio (plain/central)", "ratio"),
)


def format_table(result: dict) -> str:
    header = [title for title, _ in COLUMNS]
    body = [
        [f"{case[key]:,.0f}" if key.endswith("_per_s") else str(case[key]) for _, key in COLUMNS]
        for case in result["cases"]
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells):
        padded = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "| " + " | ".join(padded) + " |"

    lines = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [line(row) for row in body]
    notes = [f"{name}: {description}" for name, description in result["databases"].items()]
    notes += [f"{name}: skipped ({reason})" for name, reason in result["skipped"].items()]
    notes.append(
        f"{result['rows_per_writer']} rows per writer, one committed transaction per row, "
        "all writers on one conversation; sequences checked 1..total after every case."
    )
    return "\n".join(lines + [""] + notes)
