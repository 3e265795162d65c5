"""What a long reply costs the server per token on the HTML socket (issue 36).

One server (`gunicorn`: one gevent worker, thread executor, SQLite: the worker `make run`
serves from) and one stamped model (bench/stamped_model.py) streaming at `TPS` tokens a
second, faster than a real model so that 20,000 tokens take 20 s. One htmx socket reads a
reply of 300 tokens, then one of 20,000 (after a warm-up reply that is not counted); the
server's CPU (its process tree, from /proc) over each reply, per 1,000 tokens the model
sent, and the ratio of the two in the same run. Every stamp is one word of one long
paragraph (no line breaks): the live text's worst case, where no block ever becomes stable
(app/web/live_text.py renders such a line by its last word).

Beside it, the live text alone, in this process: the HTML socket's frames
(app/web/frames.py, with the hub's live state) fed the same stamps at a real model's 60
tokens/s on a simulated clock, so that 20,000 tokens take seconds, not minutes; the CPU of
the frames per 1,000 tokens, 300 against 20,000, and their ratio. At 60 tokens/s the
throttled renders come twelve tokens apart: what re-rendering the text so far would cost
shows here first.

The budget line (issue 36): a reply of 20,000 tokens costs per token what one of 300 does,
within `RATIO_BUDGET` (the short reply also carries the turn's own cost: its start, its
row, its end).
"""

from __future__ import annotations

import asyncio
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench import servers
from bench.relay_client import prompt, relay_streams
from bench.serving import CpuWindow, wait_until_quiet

NAME = "live_text"
VARIANT = "gunicorn"
TPS = 1_000
TOKENS = (300, 20_000)
QUICK_TOKENS = (300, 3_000)
WARM_UP_TOKENS = 300
FIRST_TOKEN_DELAY = 0.05
GRACE_SECONDS = 30.0
RATIO_BUDGET = 1.5
SIMULATED_TPS = 60


class SimulatedClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def frames_cpu(app, tokens: int) -> dict:
    """The HTML socket's frames for one reply of `tokens` stamps, relayed as
    app/web/sockets.py does (each delta rendered, a throttled render flushed when due)."""
    from app import events as ev
    from app.stream.live import LiveState
    from app.web.frames import HtmlFrames

    with app.test_request_context():
        clock = SimulatedClock()
        hub = LiveState()  # what the hub keeps (a late joiner's snapshot)
        hub.reset(1)
        frames = HtmlFrames(1, hub.copy(), clock=clock)
        sent = 0
        began = time.process_time()
        for index in range(tokens):
            deadline = clock.now + 1 / SIMULATED_TPS
            while (due := frames.due()) is not None and due <= deadline:
                clock.now = max(clock.now, due)
                sent += sum(map(len, frames.flush()))
            clock.now = deadline
            delta = ev.TextDelta(1, f"{time.time_ns() + index} ")
            hub.apply(delta)
            sent += sum(map(len, frames.render([delta])))
        used = time.process_time() - began
    return {
        "tokens": tokens,
        "cpu_s": round(used, 3),
        "cpu_ms_per_1k_tokens": round(used * 1e6 / tokens, 1),
        "bytes_sent_per_token": round(sent / tokens),
    }


def measure_frames(lengths: tuple[int, ...]) -> dict:
    """`frames_cpu` for each length, on an app of its own (a throwaway SQLite file)."""
    from app import create_app

    with tempfile.TemporaryDirectory(prefix="loopdesk-bench-frames-") as directory:
        app = create_app(
            {
                "instance_path": Path(directory),
                "database_url": f"sqlite:///{directory}/bench.db",
                "secret_key": "bench",
                "anthropic_api_key": "bench",
            }
        )
        try:
            frames_cpu(app, 300)  # warm-up: templates compiled, the renderer built
            cases = [frames_cpu(app, tokens) for tokens in lengths]
        finally:
            app.extensions["executor"].shutdown()
            app.extensions["services"].close()
    short, long = cases[0], cases[-1]
    return {
        "cases": cases,
        "ratio": round(long["cpu_ms_per_1k_tokens"] / short["cpu_ms_per_1k_tokens"], 2),
    }


def measure(server: servers.Server, tokens: int) -> dict:
    """One reply of `tokens` stamps read on one htmx socket; the server's CPU over it."""
    cpu = CpuWindow({"server": server.pids})
    load = os.getloadavg()[0]
    try:
        tallies = asyncio.run(
            relay_streams(
                server.url,
                server.tokens,
                "htmx",
                1,
                prompt(tokens),
                FIRST_TOKEN_DELAY + tokens / TPS + GRACE_SECONDS,
                0.3,
                cpu.start,
                cpu.end,
            )
        )
    finally:
        cpu.close()
    [tally] = tallies
    if tally.error or not tally.done:
        raise RuntimeError(f"the {tokens}-token reply did not complete: {tally.error}")
    used = cpu.used["server"]
    return {
        "tokens": tokens,
        "seconds": round(cpu.seconds, 2),
        "server_cpu_s": round(used, 3),
        "server_cpu_ms_per_1k_tokens": round(used * 1e6 / tokens, 1),
        "token_frames": tally.token_frames,
        "load_average_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def run(*, quick: bool = False, databases=("sqlite",), **_options) -> dict:
    """The short reply and the long one on one server, and their ratio."""
    lengths = QUICK_TOKENS if quick else TOKENS
    result: dict = {
        "name": NAME,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "variant": VARIANT,
        "tps": TPS,
        "python": platform.python_version(),
        "cases": [],
    }
    if "sqlite" not in databases:
        result["skipped"] = "runs on SQLite only"
        return result
    variant = next(v for v in servers.VARIANTS if v.name == VARIANT)
    began = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="loopdesk-bench-live-text-") as directory,
        servers.stamped_model(Path(directory), TPS, max(lengths), FIRST_TOKEN_DELAY) as model,
        servers.serve(variant, model, users=1) as server,
    ):
        measure(server, WARM_UP_TOKENS)
        for tokens in lengths:
            wait_until_quiet(server)
            result["cases"].append(measure(server, tokens))
            print(f"  live text: {tokens} tokens measured", flush=True)
    short, long = result["cases"][0], result["cases"][-1]
    result["ratio"] = round(
        long["server_cpu_ms_per_1k_tokens"] / short["server_cpu_ms_per_1k_tokens"], 2
    )
    result["frames"] = measure_frames(lengths)
    print("  live text: the frames alone measured", flush=True)
    result["total_seconds"] = round(time.perf_counter() - began, 1)
    return result


def budget_line(result: dict) -> dict:
    """Issue 36's line: the long reply's CPU per token against the short one's."""
    budget = (
        f"a 20,000-token reply costs per token what a 300-token one does (ratio <= {RATIO_BUDGET})"
    )
    if not result.get("cases"):
        return {"budget": budget, "status": "not measured", "detail": result.get("skipped", "")}
    short, long = result["cases"][0], result["cases"][-1]
    frames = result.get("frames") or {"ratio": None, "cases": [{}]}
    met = result["ratio"] <= RATIO_BUDGET and (frames["ratio"] or 0) <= RATIO_BUDGET
    detail = (
        f"server: {long['server_cpu_ms_per_1k_tokens']} ms / 1k tokens at "
        f"{long['tokens']:,} tokens, {short['server_cpu_ms_per_1k_tokens']} at "
        f"{short['tokens']:,} (ratio {result['ratio']}); the frames alone at "
        f"{SIMULATED_TPS} tokens/s: ratio {frames['ratio']}"
    )
    return {"budget": budget, "status": "holds" if met else "misses", "detail": detail}


def format_table(result: dict) -> str:
    from bench.report import table

    if not result.get("cases"):
        return f"live text: {result.get('skipped', 'not measured')}"
    rows = [
        [
            f"{case['tokens']:,}",
            f"{case['seconds']:.1f}",
            f"{case['server_cpu_s']:.2f}",
            f"{case['server_cpu_ms_per_1k_tokens']:.1f}",
            str(case["token_frames"]),
            " / ".join(f"{value:.2f}" for value in case["load_average_1m"]),
        ]
        for case in result["cases"]
    ]
    header = ["reply tokens", "seconds", "server CPU s", "CPU ms / 1k tokens", "frames", "load"]
    server = table(header, rows) + f"\n\nratio (longest / shortest): {result['ratio']}"
    frames = result.get("frames")
    if not frames:
        return server
    rows = [
        [
            f"{case['tokens']:,}",
            f"{case['cpu_s']:.3f}",
            f"{case['cpu_ms_per_1k_tokens']:.1f}",
            f"{case['bytes_sent_per_token']:,}",
        ]
        for case in frames["cases"]
    ]
    header = ["reply tokens", "frames CPU s", "CPU ms / 1k tokens", "bytes sent / token"]
    return (
        f"{server}\n\nThe frames alone, at a simulated {SIMULATED_TPS} tokens/s:\n\n"
        + table(header, rows)
        + f"\n\nratio (longest / shortest): {frames['ratio']}"
    )
