"""The cost of starting a turn, for a short and a long conversation, against a plain SELECT.

Turn start: `HostLoop.build_request`, everything the host loop does before the model call
(the conversation row, the tool list for the step, the history rebuilt from the tail of the
rows, fitted to the token budget, the system prompt, the tool schemas).
Floor: one core `SELECT` (no ORM) through the engine of the same rows the tail read returns:
same WHERE, `ORDER BY sequence DESC`, same LIMIT.

Conversations of 50 and 10,000 rows (50 and 2,000 with `--quick`) are built by one bulk
INSERT per 1,000 rows, shaped as `app.chat.rows.insert_message` shapes them (sequences
1..N, each row's parent, the cached token estimate in `meta`; the insert path has its own
benchmark): user text rows, assistant rows with text + tool_use blocks, hidden tool_result
rows, assistant answers and now and then an agent_output row without blocks. The long
conversation is built a second time branched (bench/branched.py: edits, regenerates and
long alternatives along it, the shown branch's rows not the newest ones), whose floor
walks the branch's path up from its leaf in the same one SELECT. Because only the tail is
read, starting a turn on the long conversation should cost at most 2x the short one; the
table says whether it does (a report: a FAIL there does not fail the benchmark). The floor
read must return exactly the rows `load_tail` returns, or the benchmark fails
(`TailMismatchError`).
"""

from __future__ import annotations

import gc
import json
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime

from sqlalchemy import insert, make_url, select

from app.chat import branches, history
from app.chat.loop import HostLoop
from app.chat.run_state import RunIds
from app.config import load_settings
from app.db import Database, utcnow
from app.heap import settle
from app.llm.budget import estimate_blocks
from app.models import Base, Conversation, Message, User
from app.services import Services, build_services
from bench import branched
from bench.inserts import POSTGRES_URL, Unreachable, open_database

NAME = "turn_start"
SMALL = 50
# Budgeting and history preparation at 100, 1,000 and 10,000 rows (the context-budget
# issue), beside the 50-row baseline the 2x target compares with.
MIDDLE = (100, 1_000)
LARGE = 10_000
QUICK_LARGE = 2_000
ITERATIONS = 300
QUICK_ITERATIONS = 60
WARM_UP = 20
ROWS_PER_COMMIT = 1_000
TARGET_RATIO = 2.0  # the long conversation's turn start p50 within 2x of the short one's
BRANCHED_P99_MS = 10.0  # issue 36: a turn's start on the long branched conversation, p99
TOOL_NAMES = ("list_offers", "get_offer", "list_personas", "get_output", "fetch_url")


class TailMismatchError(AssertionError):
    """The floor read did not return the rows the history's tail read returns."""


# --- building a conversation ---------------------------------------------------------------


def exchange(number: int) -> list[dict]:
    """One realistic exchange: the person asks, the host calls a tool (whose hidden result
    row follows, every fourth time after an agent_output card), then answers in text."""
    tool = TOOL_NAMES[number % len(TOOL_NAMES)]
    tool_use_id = f"toolu_bench_{number:06d}"
    question = f"Exchange {number}: what should the next ad for offer {number % 7} say? " * 3
    preface = f"Let me look that up with {tool} before I answer."
    answer = (
        f"Here is what I found for exchange {number}. The offer speaks to busy founders, so "
        "lead with the time it saves, keep the hook under ten words and close on one clear "
        "call to action. " * 4
    )
    result = {
        "items": [
            {"id": number * 10 + i, "name": f"item {i}", "summary": "lorem ipsum " * 8}
            for i in range(5)
        ]
    }
    rows = [
        {
            "role": "user",
            "kind": "user",
            "content": question,
            "meta": {"blocks": [{"type": "text", "text": question}]},
        },
        {
            "role": "assistant",
            "kind": "host",
            "content": preface,
            "meta": {
                "blocks": [
                    {"type": "text", "text": preface},
                    {
                        "type": "tool_use",
                        "id": tool_use_id,
                        "name": tool,
                        "input": {"offer_id": number % 7, "limit": 5},
                    },
                ],
                "stop_reason": "tool_use",
            },
        },
    ]
    if number % 4 == 3:
        rows.append(
            {
                "role": "assistant",
                "kind": "agent_output",
                "content": "",
                "meta": {
                    "agentOutput": {
                        "outputId": number,
                        "agent": "ad_copy",
                        "agentName": "Ad copy",
                        "title": f"Ad copy {number}",
                        "offerId": number % 7,
                        "content": {"headline": "Save an hour a day", "body": answer},
                    }
                },
            }
        )
    rows += [
        {
            "role": "user",
            "kind": "tool_result",
            "content": "",
            "meta": {
                "blocks": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_use_id,
                        "content": json.dumps(result),
                    }
                ],
                "hidden": True,
                "tool": tool,
            },
        },
        {
            "role": "assistant",
            "kind": "host",
            "content": answer,
            "meta": {"blocks": [{"type": "text", "text": answer}], "stop_reason": "end_turn"},
        },
    ]
    return rows


def conversation_rows(total: int) -> list[dict]:
    """`total` rows of whole exchanges, ending on the person's new message (a turn start),
    each after the one before it."""
    rows: list[dict] = []
    number = 0
    while len(rows) < total - 1:
        rows += exchange(number)
        number += 1
    rows = rows[: total - 1]
    rows.append(exchange(number)[0])
    return [
        {**row, "sequence": sequence, "parent_sequence": sequence - 1 or None}
        for sequence, row in enumerate(rows, start=1)
    ]


def analyze(db: Database) -> None:
    """Refresh PostgreSQL's planner statistics, as autovacuum would soon after a bulk load.
    Without them the fresh table looks tiny, and both the max+1 of `insert_message` and the
    tail read pick a bitmap scan of every row of the conversation plus a sort."""
    if db.engine.dialect.name == "postgresql":
        with db.engine.connect() as connection:
            connection.exec_driver_sql("ANALYZE messages")
            connection.commit()


def stored_row(conversation_id: int, row: dict) -> dict:
    """A row as `insert_message` stores it: the blocks' token estimate cached in `meta`."""
    meta = dict(row["meta"])
    if meta.get("blocks"):
        meta["tokens"] = estimate_blocks(meta["blocks"])
    return {**row, "meta": meta, "conversation_id": conversation_id, "created_at": utcnow()}


def build_conversation(db: Database, user_id: int, total: int, forked: bool) -> tuple[int, float]:
    """Insert a conversation of `total` rows (`forked`: branched, bench/branched.py);
    return its id and the setup seconds."""
    began = time.perf_counter()
    if forked:
        shaped, leaf, chosen_at = branched.branched_rows(total, exchange)
    else:
        shaped, leaf, chosen_at = conversation_rows(total), None, None
    with db.session() as session:
        conversation = Conversation(
            user_id=user_id,
            title=f"benchmark {total} rows{' branched' if forked else ''}",
            branch_leaf_sequence=leaf,
            branch_chosen_at_sequence=chosen_at,
        )
        session.add(conversation)
        session.commit()
        conversation_id = conversation.id
    rows = [stored_row(conversation_id, row) for row in shaped]
    for start in range(0, total, ROWS_PER_COMMIT):
        with db.session() as session:
            session.execute(insert(Message), rows[start : start + ROWS_PER_COMMIT])
            session.commit()
    analyze(db)
    with db.session() as session:
        count = len(
            session.scalars(
                select(Message.sequence).where(Message.conversation_id == conversation_id)
            ).all()
        )
    if count != total:
        raise AssertionError(f"expected {total} rows in the conversation, found {count}")
    return conversation_id, time.perf_counter() - began


# --- the two measurements ------------------------------------------------------------------


def tail_limit(services: Services) -> int:
    """The LIMIT `app.chat.history.load_tail` uses for the configured message cap."""
    return services.settings.history_message_cap * history.ROWS_PER_MESSAGE + 10


def floor_statement(conversation_id: int, after: int, limit: int):
    table = Message.__table__
    return (
        select(table)
        .where(table.c.conversation_id == conversation_id, table.c.sequence > after)
        .order_by(table.c.sequence.desc())
        .limit(limit)
    )


def tail_statement(services: Services, session, conversation: Conversation):
    """The floor: the tail by sequence, or for a branched conversation the branch's."""
    after, limit = conversation.summarized_up_to_sequence, tail_limit(services)
    if conversation.branch_chosen_at_sequence is None:
        return floor_statement(conversation.id, after, limit)
    leaf = branches.current_leaf(session, conversation)
    return branched.floor_statement(conversation.id, leaf, after, limit)


def check_tail(services: Services, conversation_id: int, statement) -> int:
    """The floor must read exactly the rows the history's tail read returns."""
    with services.database.session() as session:
        conversation = session.get(Conversation, conversation_id)
        tail = history.load_tail(session, conversation, services.settings.history_message_cap)
        expected = [row.sequence for row in tail]
    with services.database.engine.connect() as connection:
        floor = [row.sequence for row in reversed(connection.execute(statement).all())]
    if floor != expected:
        raise TailMismatchError(
            f"conversation {conversation_id}: load_tail read {len(expected)} rows "
            f"({expected[:1]}..{expected[-1:]}), the floor SELECT {len(floor)} "
            f"({floor[:1]}..{floor[-1:]})"
        )
    return len(expected)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


class Case:
    """One conversation's two measurements: turn start and the floor read."""

    def __init__(self, services: Services, conversation_id: int, user_id: int):
        with services.database.session() as session:
            conversation = session.get_one(Conversation, conversation_id)
            self.statement = tail_statement(services, session, conversation)
        self.tail_rows = check_tail(services, conversation_id, self.statement)
        self.host = HostLoop(services, RunIds(0, conversation_id, user_id))
        self.engine = services.database.engine
        self.turn_ms: list[float] = []
        self.floor_ms: list[float] = []
        self.request: dict = {}

    def turn_start(self) -> dict:
        return self.host.build_request({"type": "auto"}, wrap_up=False)

    def floor(self) -> list:
        with self.engine.connect() as connection:
            return connection.execute(self.statement).all()

    def measure(self) -> None:
        began = time.perf_counter()
        self.request = self.turn_start()
        self.turn_ms.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        self.floor()
        self.floor_ms.append((time.perf_counter() - began) * 1000)

    def summary(self) -> dict:
        return {
            "turn_start_p50_ms": round(statistics.median(self.turn_ms), 3),
            "turn_start_p99_ms": round(percentile(self.turn_ms, 0.99), 3),
            "turn_start_mean_ms": round(statistics.fmean(self.turn_ms), 3),
            "floor_p50_ms": round(statistics.median(self.floor_ms), 3),
            "floor_p99_ms": round(percentile(self.floor_ms, 0.99), 3),
            "tail_rows": self.tail_rows,
            "history_messages": len(self.request["messages"]),
            "tools": len(self.request["tools"]),
            "system_chars": len(self.request["system"]),
        }


def time_cases(cases: list[Case], iterations: int) -> None:
    """Warm up, then round-robin over the conversations, so that a change in the machine's
    load during the run weighs on every size alike and the ratio between them holds."""
    for _ in range(WARM_UP):
        for case in cases:
            case.turn_start()
            case.floor()
    gc.collect()
    for _ in range(iterations):
        for case in cases:
            case.measure()


# --- one database --------------------------------------------------------------------------


def make_services(db: Database, instance: str) -> Services:
    settings = load_settings(
        overrides={
            "instance_path": instance,
            "secret_key": "benchmark",
            "database_url": db.url,
            "model_provider": "anthropic",
            "anthropic_base_url": "http://127.0.0.1:9",  # never contacted: no model call
        },
        env={},
    )
    return build_services(settings, database=db)


def bench_database(
    name: str, shapes: tuple[tuple[int, bool], ...], iterations: int
) -> tuple[list[dict], str]:
    """Every (rows, branched) conversation of `shapes` on one database, timed in turn."""
    cases = []
    with open_database(name) as (db, description), tempfile.TemporaryDirectory() as instance:
        Base.metadata.create_all(db.engine)
        with db.session() as session:
            user = User(email="bench@example.com", password_hash="-", display_name="bench")
            session.add(user)
            session.commit()
            user_id = user.id
        services = make_services(db, instance)
        # As a server does once started (gunicorn.conf.py post_worker_init, app/heap.py):
        # what it loaded leaves the collector's full passes; what the runs make does not.
        settle()
        try:
            built = {shape: build_conversation(db, user_id, *shape) for shape in shapes}
            measured = {shape: Case(services, built[shape][0], user_id) for shape in shapes}
            time_cases(list(measured.values()), iterations)
            for shape in shapes:
                cases.append(
                    {
                        "database": name,
                        "rows": shape[0],
                        "branched": shape[1],
                        **measured[shape].summary(),
                        "iterations": iterations,
                        "setup_seconds": round(built[shape][1], 2),
                    }
                )
        finally:
            services.model.close()
    base = cases[0]["turn_start_p50_ms"]
    for case in cases:
        case["ratio_to_floor"] = round(case["turn_start_p50_ms"] / case["floor_p50_ms"], 2)
        case["ratio_to_small"] = round(case["turn_start_p50_ms"] / base, 2)
    return cases, description


# --- entry points --------------------------------------------------------------------------


def run(
    *, quick: bool = False, databases=("sqlite", "postgresql"), rows: int | None = None, **_options
):
    """`rows`, when given, replaces the long conversation's size."""
    sizes = (SMALL, rows or QUICK_LARGE) if quick or rows else (SMALL, *MIDDLE, LARGE)
    shapes = (*((size, False) for size in sizes), (sizes[-1], True))
    iterations = QUICK_ITERATIONS if quick else ITERATIONS
    result = {
        "name": NAME,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "sizes": list(sizes),
        "iterations": iterations,
        "target_ratio": TARGET_RATIO,
        "python": platform.python_version(),
        "databases": {},
        "skipped": {},
        "cases": [],
        "checks": {},
    }
    for name in databases:
        try:
            cases, description = bench_database(name, shapes, iterations)
        except Unreachable as error:
            where = make_url(POSTGRES_URL).render_as_string(hide_password=True)
            print(f"PostgreSQL unreachable at {where} ({error}); skipping PostgreSQL.", flush=True)
            result["skipped"][name] = f"unreachable: {error}"
            continue
        result["databases"][name] = description
        result["cases"].extend(cases)
        largest = [case for case in cases if not case["branched"]][-1]
        result["checks"][name] = {
            "rows": largest["rows"],
            "ratio_to_small": largest["ratio_to_small"],
            "passed": largest["ratio_to_small"] <= TARGET_RATIO,
        }
    return result


def budget_lines(result: dict) -> list[dict]:
    """Issue 36's lines, one per database: a turn's start on the long branched
    conversation within BRANCHED_P99_MS at p99 (beside the 50-row one's p99)."""
    lines = []
    for database in result.get("databases", {}) or ("sqlite", "postgresql"):
        cases = [c for c in result.get("cases", []) if c["database"] == database]
        forked = [c for c in cases if c.get("branched")]
        rows = forked[-1]["rows"] if forked else LARGE
        budget = f"turn start at {rows:,} branched rows <= {BRANCHED_P99_MS:g} ms p99 ({database})"
        if not forked:
            reason = result.get("skipped", {}).get(database, "turn_start not measured")
            lines.append({"budget": budget, "status": "not measured", "detail": reason})
            continue
        case, small = forked[-1], cases[0]
        met = case["turn_start_p99_ms"] <= BRANCHED_P99_MS
        detail = (
            f"{case['turn_start_p99_ms']:.1f} ms p99, {case['turn_start_p50_ms']:.1f} p50 at "
            f"{case['rows']:,} branched rows; {small['turn_start_p99_ms']:.1f} ms p99 at "
            f"{small['rows']} rows; load {_load(result)}"
        )
        lines.append({"budget": budget, "status": "holds" if met else "misses", "detail": detail})
    return lines


def _load(result: dict) -> str:
    """The 1-minute load average at the start and end (the harness's, bench/__init__.py)."""
    return " -> ".join(f"{value:.2f}" for value in result.get("load_average_1m", [])) or "?"


COLUMNS = (
    ("database", "database"),
    ("rows", "rows"),
    ("turn start p50 ms", "turn_start_p50_ms"),
    ("p99 ms", "turn_start_p99_ms"),
    ("floor p50 ms", "floor_p50_ms"),
    ("ratio to floor", "ratio_to_floor"),
    (f"ratio to {SMALL}-row", "ratio_to_small"),
)


def rows_label(case: dict) -> str:
    return f"{case['rows']:,}{' branched' if case.get('branched') else ''}"


def _cell(key: str, case: dict) -> str:
    value = case[key]
    if key == "rows":
        return rows_label(case)
    if key.endswith("_ms"):
        return f"{value:.2f}"
    return str(value)


def format_table(result: dict) -> str:
    header = [title for title, _ in COLUMNS]
    body = [[_cell(key, case) for _, key in COLUMNS] for case in result["cases"]]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells):
        padded = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return "| " + " | ".join(padded) + " |"

    lines = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [line(row) for row in body]
    checks = [
        f"{'PASS' if check['passed'] else 'FAIL'} {name}: {check['rows']:,} rows start a turn "
        f"in {check['ratio_to_small']}x the time of {SMALL} rows (target <= {TARGET_RATIO}x)"
        for name, check in result["checks"].items()
    ]
    notes = [f"{name}: {description}" for name, description in result["databases"].items()]
    notes += [f"{name}: skipped ({reason})" for name, reason in result["skipped"].items()]
    notes += [
        f"{case['database']}, {rows_label(case)} rows: tail read {case['tail_rows']} rows -> "
        f"{case['history_messages']} messages, {case['tools']} tools, "
        f"{case['system_chars']:,}-char system prompt; built in {case['setup_seconds']} s"
        for case in result["cases"]
    ]
    notes.append(
        f"{result['iterations']} timed build_request calls per case after {WARM_UP} warm-up, "
        "the sizes taken in turn; each call followed by the floor: one core SELECT of the "
        "same tail rows through the engine."
    )
    return "\n".join(lines + [""] + checks + [""] + notes)
