"""Search across chats at 100,000 messages, against a plain indexed lookup.

One person owns 200 conversations of 500 rows (with `--quick`, 20 of 250), written by
bulk INSERTs shaped as the insert path writes them, with their index rows
(`app.chat.search.searchable_text`, as `index_row` stores it). Then `app.chat.search.search`
answers queries of one and two words, common and rare, the way the API calls it (20 hits,
snippets, titles), beside a plain lookup of one row by (conversation, sequence) through
the unique index. Every query must find what was written (a check, not a budget).
"""

from __future__ import annotations

import platform
import random
import statistics
import time
from datetime import UTC, datetime

from sqlalchemy import bindparam, insert, make_url, select, text

from app.chat.search import search, searchable_text
from app.chat.search_index import TABLE
from app.db import utcnow
from app.models import Base, Conversation, Message, User
from bench.inserts import POSTGRES_URL, Unreachable, open_database

NAME = "search"
CHATS, ROWS_PER_CHAT = 200, 500
QUICK_CHATS, QUICK_ROWS_PER_CHAT = 20, 250
QUERIES, QUICK_QUERIES = 300, 60
WARM_UP = 10
BATCH = 2_000
COMMON = ["launch", "copy", "offer", "audience", "headline", "email", "campaign", "price"]
RARE = [f"sku{n:04d}" for n in range(400)]  # each in about 1 of 450 rows


def _sentence(rng: random.Random) -> str:
    words = rng.choices(COMMON, k=6) + rng.choices(["the", "for", "a", "new", "our"], k=4)
    if rng.random() < 0.3:
        words.append(rng.choice(RARE))
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def _populate(db, chats: int, rows_per_chat: int, rng: random.Random) -> int:
    with db.session() as session:
        user = User(email="bench@example.com", password_hash="-", display_name="bench")
        session.add(user)
        session.flush()
        user_id = user.id
        session.add_all(Conversation(user_id=user_id, title=f"Chat {n}") for n in range(chats))
        session.commit()
        chat_ids = list(session.scalars(select(Conversation.id).order_by(Conversation.id)))
    now = utcnow()
    rows = []
    for chat_id in chat_ids:
        for sequence in range(1, rows_per_chat + 1):
            kind = "user" if sequence % 2 else "host"
            rows.append(
                {
                    "conversation_id": chat_id,
                    "sequence": sequence,
                    "parent_sequence": sequence - 1 or None,
                    "role": "user" if kind == "user" else "assistant",
                    "kind": kind,
                    "content": " ".join(_sentence(rng) for _ in range(3)),
                    "meta": {},
                    "created_at": now,
                }
            )
    dialect = db.engine.dialect.name
    column = "rowid" if dialect == "sqlite" else "message_id"
    index = text(f"INSERT INTO {TABLE} ({column}, body) VALUES (:id, :body)")
    with db.engine.begin() as connection:
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            ids = connection.execute(
                insert(Message).returning(Message.id, sort_by_parameter_order=True), batch
            ).scalars()
            documents = [
                {"id": message_id, "body": searchable_text(row["kind"], row["content"], {})}
                for message_id, row in zip(ids, batch, strict=True)
            ]
            connection.execute(index, documents)
        if dialect == "postgresql":
            # Every table the query joins, as autovacuum would have by now: without it the
            # planner takes the person's 200 chats for one and reads all their rows.
            connection.exec_driver_sql(
                f"ANALYZE messages; ANALYZE {TABLE}; ANALYZE conversations; ANALYZE project_members"
            )
    return user_id


def _timed(call):
    """(milliseconds, what the call returned)."""
    began = time.perf_counter()
    value = call()
    return (time.perf_counter() - began) * 1000, value


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return round(statistics.median(ordered), 3), round(p99, 3)


def bench_database(name: str, chats: int, rows_per_chat: int, queries: int):
    rng = random.Random(21)
    with open_database(name) as (db, description):
        Base.metadata.create_all(db.engine)
        began = time.perf_counter()
        user_id = _populate(db, chats, rows_per_chat, rng)
        setup_seconds = round(time.perf_counter() - began, 1)
        lookup = select(Message).where(
            Message.conversation_id == bindparam("chat"), Message.sequence == bindparam("seq")
        )
        asked = [
            rng.choice(
                [rng.choice(COMMON), f"{rng.choice(COMMON)} {rng.choice(COMMON)}", rng.choice(RARE)]
            )
            for _ in range(queries + WARM_UP)
        ]
        search_ms, lookup_ms, empty = [], [], 0
        with db.session() as session:
            for number, query in enumerate(asked):
                spent, found = _timed(lambda q=query: search(session, user_id, q))
                session.rollback()
                chat = rng.randint(1, chats)
                seq = rng.randint(1, rows_per_chat)
                plain, _ = _timed(
                    lambda c=chat, s=seq: session.execute(lookup, {"chat": c, "seq": s}).first()
                )
                session.rollback()
                if number < WARM_UP:
                    continue
                search_ms.append(spent)
                lookup_ms.append(plain)
                empty += not found.hits and query in COMMON
        if empty:
            raise AssertionError(f"{name}: {empty} queries for common words found nothing")
    search_p50, search_p99 = _percentiles(search_ms)
    lookup_p50, lookup_p99 = _percentiles(lookup_ms)
    case = {
        "database": name,
        "messages": chats * rows_per_chat,
        "queries": queries,
        "search_p50_ms": search_p50,
        "search_p99_ms": search_p99,
        "lookup_p50_ms": lookup_p50,
        "lookup_p99_ms": lookup_p99,
        "ratio_p50": round(search_p50 / lookup_p50, 1) if lookup_p50 else None,
        "setup_seconds": setup_seconds,
    }
    return case, description


def run(*, quick: bool = False, databases=("sqlite", "postgresql"), **_options) -> dict:
    chats, per_chat = (QUICK_CHATS, QUICK_ROWS_PER_CHAT) if quick else (CHATS, ROWS_PER_CHAT)
    queries = QUICK_QUERIES if quick else QUERIES
    result = {
        "name": NAME,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "python": platform.python_version(),
        "databases": {},
        "skipped": {},
        "cases": [],
    }
    for name in databases:
        try:
            case, description = bench_database(name, chats, per_chat, queries)
        except Unreachable as error:
            where = make_url(POSTGRES_URL).render_as_string(hide_password=True)
            print(f"PostgreSQL unreachable at {where} ({error}); skipping PostgreSQL.", flush=True)
            result["skipped"][name] = f"unreachable: {error}"
            continue
        result["databases"][name] = description
        result["cases"].append(case)
    return result


def format_table(result: dict) -> str:
    from bench.report import search_table

    return search_table(result)
