"""What one whole turn costs, per run rather than per token (issue 36).

Servers up at once, `make run`'s (`make-run`: make_run.py's gunicorn, one gevent worker,
thread executor, SQLite) and the minimal relay (`minimal`: no persistence, auth or history),
both on one stamped model (bench/stamped_model.py) answering every turn with ONE token and
no first-token delay (`stamps=1 delay=0`), so the turn is the server's own work. One JSON
socket per server; turns one after another, alternating between the two servers so that
load from elsewhere on the machine weighs on both alike. A turn: from sending
`POST /api/chats/<id>/loop` to the run's `done` frame on the socket.

Per turn: its wall time, and the server's CPU over it, read from /proc as the on-CPU time
of every thread of the server's processes (`/proc/<pid>/task/<tid>/schedstat`, in
nanoseconds: `stat`'s utime and stime count 10 ms ticks, as long as a whole turn): p50 and
p99. The mean is `stat`'s over all the turns (threads that ended meanwhile included, which
a per-turn reading of live threads misses). The
app's chat changes every `TURNS_PER_CHAT` turns (a chat's history is read back each turn;
one ever-growing chat would measure the history, not the turn).

The budget line (issue 36): the app's one-token turn within `RATIO_BUDGET` of the relay's,
p50 wall time and mean CPU.

A third server, `make-run, crowded`, is `make run`'s again with a person who has a long past
(bench/crowd.py: 100,000 earlier chats, each with its finished run and usage event): its
turns alternate with the other two, and its line asks that they cost what a new person's do
(within `CROWD_BUDGET`), so that no statement of a turn reads by person, by status or
across every chat without an index.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench import crowd, servers
from bench.relay_client import RelayClient, StreamFailed, Tally, close_all, guarded, prompt
from bench.serving import percentile, wait_until_quiet

NAME = "turn_cost"
VARIANTS = (servers.MINIMAL, servers.MAKE_RUN)
TURNS = 200
QUICK_TURNS = 20
WARM_UP = 10
TURNS_PER_CHAT = 10
TURN_SECONDS = 15.0
RATIO_BUDGET = 2.0
# The person with a long past (bench/crowd.py) against a new one, on the same server.
CROWDED = "make-run, crowded"
CROWD_BUDGET = 1.2
MESSAGE = prompt(1, delay=0)


def thread_cpu_ns(pids: list[int]) -> dict[tuple[int, int], int]:
    """On-CPU nanoseconds of every live thread of the processes and their descendants."""
    readings = {}
    for pid in servers.process_tree(pids):
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                with (
                    contextlib.suppress(OSError, ValueError),
                    open(f"/proc/{pid}/task/{tid}/schedstat") as handle,
                ):
                    readings[(pid, int(tid))] = int(handle.read().split()[0])
    return readings


def thread_cpu_used(before: dict[tuple[int, int], int], after: dict[tuple[int, int], int]) -> int:
    """Nanoseconds between two readings: a thread born meanwhile from zero; one that ended
    meanwhile is not counted (its time is in `stat`'s totals, the mean)."""
    return sum(ns - before.get(key, 0) for key, ns in after.items())


class Side:
    """One server's socket client and what its turns measured."""

    def __init__(self, server: servers.Server, label: str | None = None):
        self.server = server
        self.label = label or server.variant.name
        self.client = RelayClient(server.url, server.tokens[:1], "json")
        self.turns = 0
        self.wall_ms: list[float] = []
        self.cpu_ms: list[float] = []
        self.errors: list[str] = []
        self.stat_before: dict[int, float] = {}
        self.stat_after: dict[int, float] = {}

    async def new_chat(self) -> None:
        await close_all(self.client.streams)
        await self.client.prepare(1)
        if self.client.streams[0].tally.error:
            raise StreamFailed(self.client.streams[0].tally.error)
        await asyncio.sleep(0.2)  # the socket subscribes after its handshake

    async def turn(self, timed: bool) -> None:
        if self.turns % TURNS_PER_CHAT == 0:
            await self.new_chat()
        self.turns += 1
        stream = self.client.streams[0]
        tally = Tally()
        deadline = asyncio.get_running_loop().time() + TURN_SECONDS
        cpu = thread_cpu_ns(self.server.pids)
        began = time.perf_counter()
        await guarded(tally, self.client.turn(stream, MESSAGE, tally), deadline)
        wall = time.perf_counter() - began
        cpu = thread_cpu_used(cpu, thread_cpu_ns(self.server.pids))
        if tally.error:
            self.errors.append(tally.error)
            await self.new_chat()
        elif timed:
            self.wall_ms.append(wall * 1e3)
            self.cpu_ms.append(cpu / 1e6)

    def summary(self) -> dict:
        entry: dict = {
            "variant": self.label,
            "turns": len(self.wall_ms),
            "errors": len(self.errors),
            "first_errors": self.errors[:3],
        }
        if self.wall_ms:
            stat = servers.cpu_used(self.stat_before, self.stat_after)
            entry |= {
                "wall_p50_ms": round(statistics.median(self.wall_ms), 2),
                "wall_p99_ms": round(percentile(self.wall_ms, 0.99), 2),
                "cpu_p50_ms": round(statistics.median(self.cpu_ms), 2),
                "cpu_p99_ms": round(percentile(self.cpu_ms, 0.99), 2),
                # Every process's utime + stime over all the turns (ended threads too).
                "cpu_mean_ms": round(stat * 1e3 / len(self.wall_ms), 2),
            }
        return entry


async def alternate(sides: list[Side], turns: int) -> None:
    """Warm-up turns, then `turns` timed turns on each side, one server after the other."""
    try:
        for _ in range(WARM_UP):
            for side in sides:
                await side.turn(timed=False)
        for side in sides:
            side.stat_before = servers.tree_cpu(side.server.pids)
        for _ in range(turns):
            for side in sides:
                await side.turn(timed=True)
        for side in sides:
            side.stat_after = servers.tree_cpu(side.server.pids)
    finally:
        for side in sides:
            await side.client.close()


def run(*, quick: bool = False, databases=("sqlite",), **_options) -> dict:
    turns = QUICK_TURNS if quick else TURNS
    result: dict = {
        "name": NAME,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "turns": turns,
        "message": MESSAGE,
        "python": platform.python_version(),
        "cases": [],
    }
    if "sqlite" not in databases:
        result["skipped"] = "runs on SQLite only"
        return result
    chosen = [next(v for v in servers.VARIANTS if v.name == name) for name in VARIANTS]
    began = time.perf_counter()
    load = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        directory = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="loopdesk-bench-turn-"))
        )
        model = stack.enter_context(servers.stamped_model(directory, 60.0, 1, 0.0))
        started = [stack.enter_context(servers.serve(v, model, users=1)) for v in chosen]
        crowded = stack.enter_context(servers.serve(chosen[1], model, users=1))
        chats = crowd.QUICK_CHATS if quick else crowd.CHATS
        result["crowd"] = {"chats": chats, "seconds": round(crowd.fill(crowded.database, chats), 1)}
        for server in [*started, crowded]:
            wait_until_quiet(server)
        sides = [Side(server) for server in started] + [Side(crowded, CROWDED)]
        asyncio.run(alternate(sides, turns))
    result["cases"] = [side.summary() for side in sides]
    result["load_average_1m"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    floor, app, crowded_app = result["cases"]
    if floor.get("turns") and app.get("turns"):
        result["wall_ratio"] = round(app["wall_p50_ms"] / floor["wall_p50_ms"], 2)
        result["cpu_ratio"] = round(app["cpu_mean_ms"] / floor["cpu_mean_ms"], 2)
    if app.get("turns") and crowded_app.get("turns"):
        result["crowd_wall_ratio"] = round(crowded_app["wall_p50_ms"] / app["wall_p50_ms"], 2)
        result["crowd_cpu_ratio"] = round(crowded_app["cpu_mean_ms"] / app["cpu_mean_ms"], 2)
    result["total_seconds"] = round(time.perf_counter() - began, 1)
    return result


def budget_line(result: dict) -> dict:
    """Issue 36's line: the app's one-token turn against the minimal relay's."""
    budget = (
        f"a one-token turn (POST /loop to the end frame) on make run's server within "
        f"{RATIO_BUDGET:g}x of the minimal relay's (p50 wall, mean CPU)"
    )
    if "wall_ratio" not in result:
        detail = result.get("skipped") or "; ".join(
            f"{case['variant']}: {case['errors']} errors {case['first_errors']}"
            for case in result.get("cases", [])
        )
        return {"budget": budget, "status": "not measured", "detail": detail or "no data"}
    floor, app = result["cases"][:2]
    met = max(result["wall_ratio"], result["cpu_ratio"]) <= RATIO_BUDGET
    detail = (
        f"wall p50 {app['wall_p50_ms']} vs {floor['wall_p50_ms']} ms ({result['wall_ratio']}x); "
        f"CPU {app['cpu_mean_ms']} vs {floor['cpu_mean_ms']} ms a turn ({result['cpu_ratio']}x)"
    )
    return {"budget": budget, "status": "holds" if met else "misses", "detail": detail}


def crowd_budget_line(result: dict) -> dict:
    """A turn must not cost more for a person with a long past: the same one-token turn for
    a person with `crowd.CHATS` earlier chats (each with its run and usage event) against
    one for a new person, same server, same run."""
    crowd_of = result.get("crowd", {})
    budget = (
        f"a one-token turn for a person with {crowd.CHATS:,} earlier chats (each with its run "
        f"and usage event) within {CROWD_BUDGET:g}x of a new person's (p50 wall, mean CPU)"
    )
    if "crowd_wall_ratio" not in result:
        return {"budget": budget, "status": "not measured", "detail": "no data"}
    app, crowded_app = result["cases"][1:3]
    met = max(result["crowd_wall_ratio"], result["crowd_cpu_ratio"]) <= CROWD_BUDGET
    detail = (
        f"wall p50 {crowded_app['wall_p50_ms']} vs {app['wall_p50_ms']} ms "
        f"({result['crowd_wall_ratio']}x); CPU {crowded_app['cpu_mean_ms']} vs "
        f"{app['cpu_mean_ms']} ms a turn ({result['crowd_cpu_ratio']}x); "
        f"{crowd_of.get('chats', 0):,} chats written in {crowd_of.get('seconds')} s"
    )
    return {"budget": budget, "status": "holds" if met else "misses", "detail": detail}


def format_table(result: dict) -> str:
    from bench.report import table

    if not result.get("cases"):
        return f"turn cost: {result.get('skipped', 'not measured')}"
    columns = ("wall_p50_ms", "wall_p99_ms", "cpu_p50_ms", "cpu_p99_ms", "cpu_mean_ms")
    rows = [
        [case["variant"], str(case["turns"]), str(case["errors"])]
        + [f"{case[c]:.2f}" if c in case else "-" for c in columns]
        for case in result["cases"]
    ]
    header = ["server", "turns", "errors", "wall p50 ms", "wall p99 ms", "CPU p50 ms"]
    header += ["CPU p99 ms", "CPU mean ms"]
    load = " / ".join(f"{value:.2f}" for value in result["load_average_1m"])
    ratios = (
        f"ratio (make-run / minimal): wall p50 {result['wall_ratio']}x, CPU mean "
        f"{result['cpu_ratio']}x"
        if "wall_ratio" in result
        else "ratio: not measured"
    )
    if "crowd_wall_ratio" in result:
        ratios += (
            f"; crowded (a person with {result['crowd']['chats']:,} earlier chats) / make-run: "
            f"wall p50 {result['crowd_wall_ratio']}x, CPU mean {result['crowd_cpu_ratio']}x"
        )
    return f"{table(header, rows)}\n\n{ratios}; load {load}"
