"""The serving benchmarks: every server variant (`bench.servers.VARIANTS`) against the
minimal relay, with the stamped model in its own process and the readers in this one.

Per variant, started once and stopped before the next:
- relay: C concurrent streams (1, 20, 100, 200, and 400 for the minimal relay and the
  scaled variant) of `tokens` stamped tokens each at 60 tokens/s; per-token latency from
  the model's send stamp to a socket client (JSON, and the htmx page's HTML socket where
  the variant lists it), and the server's CPU (every process
  of the variant, from /proc) per 1,000 tokens delivered;
- first frame: turns one after another in one chat, from sending `POST /loop` to the first
  text frame, beside the model's own time to first token (the same turns read straight
  from it);
- idle sockets: the server's RSS before and after opening N sockets that then sit idle.
The floors: the minimal relay (`bench.minimal_relay`) for the relay and idle sockets, run
the same way in the same run; the async SDK reading the model directly, no relay, for the
relay too; the model's own time to first token for the first frame.

A variant that cannot start (service unreachable, command missing) is skipped with its
reason; a stream that fails is counted; a level fails only when every stream fails.
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from bench import servers
from bench.relay_client import (
    IdleSockets,
    Tally,
    first_frames,
    floor_streams,
    model_first_tokens,
    prompt,
    relay_streams,
)

NAME = "serving"
LEVELS = (1, 20, 100, 200, servers.SCALED_STREAMS)
QUICK_LEVELS = (1, 5)
TOKENS = 180  # 3 s of streaming at 60 tokens/s
QUICK_TOKENS = 30
TPS = 60.0
FIRST_TOKEN_DELAY = 0.2  # the model's own time to first token, seconds
GRACE_SECONDS = 15.0  # beyond the stream's own length, before a stream counts as timed out
QUICK_GRACE_SECONDS = 10.0
FIRST_FRAME_TURNS, FIRST_FRAME_WARM_UP, FIRST_FRAME_TOKENS = 15, 2, 3
QUICK_FIRST_FRAME_TURNS, QUICK_FIRST_FRAME_WARM_UP = 4, 1
IDLE_CHATS = 20
QUICK_IDLE_SOCKETS = 50
IDLE_WARM_UP = 20
IDLE_SETTLE_SECONDS = 2.0
QUICK_IDLE_SETTLE_SECONDS = 0.5
SAMPLE_SECONDS = 0.2
MAX_SAMPLES = 3_000
QUIET_CPU_PERCENT = 10.0  # a level starts once the server is this idle (runs left over)
QUIET_MAX_SECONDS = 15.0
QUICK_VARIANTS = ("minimal", "embedded")
# The CPU group of the whole machine: its busy share tells whether a level had spare CPU,
# and so whether a server's p99 at that level measures the server or the machine's limit.
MACHINE = "machine"
CPUS = os.cpu_count() or 1


# --- readings ------------------------------------------------------------------------------


class CpuWindow:
    """CPU seconds of each process group over a window, and the server's peak thread
    count, sampled every `SAMPLE_SECONDS` by a helper thread."""

    def __init__(self, groups: dict[str, list[int]], threads_of: list[int] | None = None):
        self.groups = groups
        self.threads_of = threads_of
        self.before: dict[str, dict[int, float]] = {}
        self.used: dict[str, float] = {}
        self.began = self.seconds = 0.0
        self.peak_threads = 0
        self.peak_rss = 0
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def start(self) -> None:
        if self.threads_of is not None:
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        self.began = time.perf_counter()
        self.before = {name: self._reading(name, pids) for name, pids in self.groups.items()}

    def end(self) -> None:
        self.seconds = time.perf_counter() - self.began
        self.used = {
            name: servers.cpu_used(self.before[name], self._reading(name, pids))
            for name, pids in self.groups.items()
        }
        self.close()

    @staticmethod
    def _reading(name: str, pids: list[int]) -> dict[int, float]:
        # The client is this process, whose children are the servers and the model: its
        # own CPU only. "machine": every CPU's busy time. Every other group is a process
        # with its descendants (workers).
        if name == MACHINE:
            return {0: servers.machine_busy_seconds()}
        if name == "client":
            return {pid: servers.cpu_seconds(pid) for pid in pids}
        return servers.tree_cpu(pids)

    def close(self) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=5)

    def _sample(self) -> None:
        for _ in range(MAX_SAMPLES):
            self.peak_threads = max(self.peak_threads, servers.tree_threads(self.threads_of))
            self.peak_rss = max(self.peak_rss, servers.tree_rss(self.threads_of))
            if self._stop.wait(SAMPLE_SECONDS):
                return


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def per_stream_tps(tally: Tally) -> float | None:
    if tally.tokens < 2 or tally.last_stamp == tally.first_stamp:
        return None
    return (tally.tokens - 1) / ((tally.last_stamp - tally.first_stamp) / 1e9)


def peak_concurrency(tallies: list[Tally]) -> int:
    """The most streams whose tokens were being sent at one moment (first to last stamp):
    below the level when the server is slow to start runs."""
    edges = sorted(
        edge
        for tally in tallies
        if tally.first_stamp is not None
        for edge in ((tally.first_stamp, 1), (tally.last_stamp, -1))
    )
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def latency_summary(samples_ms: list[float]) -> dict:
    if not samples_ms:
        return {}
    return {
        "p50_ms": round(statistics.median(samples_ms), 3),
        "p90_ms": round(percentile(samples_ms, 0.90), 3),
        "p99_ms": round(percentile(samples_ms, 0.99), 3),
        "max_ms": round(max(samples_ms), 3),
    }


def summarize(tallies: list[Tally], tokens: int, cpu: CpuWindow) -> dict:
    delivered = sum(tally.tokens for tally in tallies)
    errors = Counter(tally.error for tally in tallies if tally.error)
    rates = [rate for rate in map(per_stream_tps, tallies) if rate]
    first = [tally.first_token_ns / 1e6 for tally in tallies if tally.first_token_ns]
    accepted = [tally.accepted_ns / 1e6 for tally in tallies if tally.accepted_ns]
    summary = {
        "streams": len(tallies),
        "completed": sum(1 for tally in tallies if tally.done and not tally.error),
        "errors": dict(errors),
        "tokens_delivered": delivered,
        "tokens_expected": len(tallies) * tokens,
        # Every stamp is its send time: one not after the one before came twice or late.
        "tokens_out_of_order": sum(tally.out_of_order for tally in tallies),
        "seconds": round(cpu.seconds, 2),
        "model_tps_per_stream_p50": round(statistics.median(rates), 1) if rates else None,
        "peak_concurrent_streams": peak_concurrency(tallies),
        "token_frames": sum(tally.token_frames for tally in tallies),
        "other_frames": sum(tally.other_frames for tally in tallies),
        "first_token_p50_ms": round(statistics.median(first), 1) if first else None,
        "first_token_max_ms": round(max(first), 1) if first else None,
        "loop_post_p50_ms": round(statistics.median(accepted), 1) if accepted else None,
        **latency_summary([ns / 1e6 for tally in tallies for ns in tally.latencies_ns]),
    }
    for name, used in cpu.used.items():
        summary[f"{name}_cpu_ms_per_1k_tokens"] = (
            round(used * 1e6 / delivered, 1) if delivered else None
        )
        summary[f"{name}_cpu_percent"] = round(100 * used / cpu.seconds, 1) if cpu.seconds else 0
    if MACHINE in cpu.used:
        summary["machine_cpus"] = CPUS
    return summary


# --- measurements --------------------------------------------------------------------------


class Plan:
    def __init__(self, quick: bool, first_token_delay: float):
        self.quick = quick
        self.levels = QUICK_LEVELS if quick else LEVELS
        self.tokens = QUICK_TOKENS if quick else TOKENS
        self.grace = QUICK_GRACE_SECONDS if quick else GRACE_SECONDS
        self.first_token_delay = first_token_delay
        self.first_frame_turns = QUICK_FIRST_FRAME_TURNS if quick else FIRST_FRAME_TURNS
        self.first_frame_warm_up = QUICK_FIRST_FRAME_WARM_UP if quick else FIRST_FRAME_WARM_UP
        self.idle_settle = QUICK_IDLE_SETTLE_SECONDS if quick else IDLE_SETTLE_SECONDS

    @property
    def stream_seconds(self) -> float:
        return self.first_token_delay + self.tokens / TPS + self.grace

    @property
    def message(self) -> str:
        return prompt(self.tokens)

    @property
    def short_message(self) -> str:
        return prompt(FIRST_FRAME_TOKENS)

    def idle_sockets(self, variant: servers.Variant) -> int:
        return min(variant.idle_sockets, QUICK_IDLE_SOCKETS) if self.quick else variant.idle_sockets


def measure_floor(model: servers.Model, plan: Plan, streams: int) -> dict:
    cpu = CpuWindow({"model": [model.process.pid], "client": [os.getpid()], MACHINE: []})
    tallies = asyncio.run(
        floor_streams(model.url, streams, plan.message, plan.stream_seconds, cpu.start, cpu.end)
    )
    cpu.close()
    return {"streams": streams, **summarize(tallies, plan.tokens, cpu)}


def measure_relay(model, server: servers.Server, plan: Plan, fmt: str, streams: int) -> dict:
    groups = {
        "server": server.pids,
        "model": [model.process.pid],
        "client": [os.getpid()],
        MACHINE: [],
    }
    if len(server.pids) > 1:
        # Where a multi-process variant spends it: the web server, and the run workers.
        groups.update(web=server.pids[:1], workers=server.pids[1:])
    cpu = CpuWindow(groups, threads_of=server.pids)
    idle_threads = servers.tree_threads(server.pids)
    idle_rss = servers.tree_rss(server.pids)
    load = os.getloadavg()[0]
    try:
        tallies = asyncio.run(
            relay_streams(
                server.url,
                server.tokens,
                fmt,
                streams,
                plan.message,
                plan.stream_seconds,
                0.2 + 0.002 * streams,  # for the sockets to subscribe after their handshake
                cpu.start,
                cpu.end,
            )
        )
    finally:
        cpu.close()
    return {
        "variant": server.variant.name,
        "format": fmt,
        "streams": streams,
        **summarize(tallies, plan.tokens, cpu),
        "server_threads": {"idle": idle_threads, "peak": cpu.peak_threads},
        "server_rss_mb": {
            "idle": round(idle_rss / 2**20, 1),
            "peak": round(max(cpu.peak_rss, idle_rss) / 2**20, 1),
        },
        "load_average_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def relay_levels(variant: servers.Variant, plan: Plan, most: int) -> list[int]:
    wanted = variant.relay_levels
    return [n for n in plan.levels if n <= most and (wanted is None or n in wanted)]


def wait_until_quiet(server: servers.Server) -> float:
    """Until the server's CPU falls under `QUIET_CPU_PERCENT` (runs of a level whose client
    gave up may still be streaming); the seconds waited."""
    began = time.perf_counter()
    while time.perf_counter() - began < QUIET_MAX_SECONDS:
        before = servers.tree_cpu(server.pids)
        time.sleep(0.3)
        used = servers.cpu_used(before, servers.tree_cpu(server.pids))
        if 100 * used / 0.3 < QUIET_CPU_PERCENT:
            break
    return time.perf_counter() - began


def measure_first_frame(server: servers.Server, plan: Plan, model_ttft: dict) -> dict:
    tallies = asyncio.run(
        first_frames(
            server.url,
            server.tokens,
            plan.short_message,
            plan.first_frame_turns,
            plan.first_frame_warm_up,
            plan.stream_seconds,
        )
    )
    ok = [t for t in tallies if t.first_token_ns is not None and not t.error]
    first = [t.first_token_ns / 1e6 for t in ok]
    relayed = [t.latencies_ns[0] / 1e6 for t in ok]
    result = {
        "variant": server.variant.name,
        "database": server.variant.database,
        "turns": len(tallies),
        "completed": len(ok),
        "errors": dict(Counter(t.error for t in tallies if t.error)),
        "model_first_token_p50_ms": model_ttft.get("p50_ms"),
    }
    if first:
        result |= {
            "first_frame_p50_ms": round(statistics.median(first), 2),
            "first_frame_p90_ms": round(percentile(first, 0.9), 2),
            "first_frame_max_ms": round(max(first), 2),
            # Of which: the first token's way from the model's write to the socket client.
            "first_token_relay_p50_ms": round(statistics.median(relayed), 2),
            "over_model_p50_ms": round(statistics.median(first) - model_ttft["p50_ms"], 2),
        }
    return result


def measure_idle(server: servers.Server, sockets: int, settle: float) -> dict:
    async def hold() -> dict:
        idle = IdleSockets(server.url, server.tokens)
        try:
            await idle.create_chats(min(IDLE_CHATS, sockets))
            await idle.open_sockets(IDLE_WARM_UP)  # first sockets pay for lazy imports, pools
            await idle.close_sockets()
            await asyncio.sleep(settle)
            before, threads_before = (
                servers.tree_rss(server.pids),
                servers.tree_threads(server.pids),
            )
            began = time.perf_counter()
            opened = await idle.open_sockets(sockets)
            open_seconds = time.perf_counter() - began
            await asyncio.sleep(settle)
            after, threads_after = servers.tree_rss(server.pids), servers.tree_threads(server.pids)
            return {
                "variant": server.variant.name,
                "sockets_requested": sockets,
                "sockets_open": opened,
                "open_seconds": round(open_seconds, 2),
                "rss_before_mb": round(before / 2**20, 1),
                "rss_after_mb": round(after / 2**20, 1),
                "kb_per_socket": round((after - before) / 1024 / opened, 1) if opened else None,
                "threads_before": threads_before,
                "threads_after": threads_after,
                "errors": dict(Counter(idle.errors)),
                "server_alive": server.alive(),
            }
        finally:
            await idle.aclose()

    return asyncio.run(hold())


# --- entry point ---------------------------------------------------------------------------

_STARTED = time.perf_counter()


def progress(text: str) -> None:
    print(f"  [{time.perf_counter() - _STARTED:6.1f} s] {text}", flush=True)


def selected_variants(databases, variants) -> list[servers.Variant]:
    wanted = set(variants) if variants else None
    return [
        variant
        for variant in servers.VARIANTS
        if (wanted is None or variant.name in wanted)
        and (variant.database in databases or variant.database == "none")
    ]


def run_variant(
    variant, model, plan: Plan, result: dict, model_ttft: dict, relay_round: int = 1
) -> None:
    """Every measurement the variant lists; `relay_round` 2: the relay again, nothing else
    (the minimal relay, measured first and last, so that a burst of other work on the
    machine during one of its levels does not become the floor)."""
    progress(f"{variant.name}: {variant.label}" + (" (again)" if relay_round > 1 else ""))
    entry = result["variants"].setdefault(variant.name, {"label": variant.label, "status": "ran"})
    try:
        with servers.serve(variant, model, users=max(plan.levels)) as server:
            entry["setup_seconds"] = round(server.setup_seconds, 1)
            for fmt, most in variant.formats if variant.relay else ():
                for streams in relay_levels(variant, plan, most):
                    if not server.alive():
                        raise servers.SkipVariant("the server died during the relay benchmark")
                    wait_until_quiet(server)
                    progress(f"  relay {fmt} {streams} stream(s)")
                    case = measure_relay(model, server, plan, fmt, streams)
                    result["relay"].append({**case, "round": relay_round})
            if relay_round > 1:
                return
            if variant.first_frame:
                progress("  first frame")
                result["first_frame"].append(measure_first_frame(server, plan, model_ttft))
            sockets = plan.idle_sockets(variant)
            if sockets:
                wait_until_quiet(server)
                progress(f"  {sockets} idle sockets")
                result["idle_sockets"].append(measure_idle(server, sockets, plan.idle_settle))
            entry["log"] = servers.log_problems(server.log)
    except servers.SkipVariant as reason:
        entry.update(status="skipped", reason=str(reason)[:400])
        progress(f"SKIPPED {variant.name}: {str(reason)[:400]}")


def run(
    *,
    quick: bool = False,
    databases=("sqlite", "postgresql"),
    rows: int | None = None,
    variants: tuple[str, ...] | None = None,
    first_token_delay: float = FIRST_TOKEN_DELAY,
    **_options,
) -> dict:
    """`rows` belongs to the database benchmarks; `variants` picks server variants (the
    quick run: the minimal relay and the embedded server)."""
    plan = Plan(quick, first_token_delay)
    if variants is None and quick:
        variants = QUICK_VARIANTS
    chosen = selected_variants(databases, variants)
    servers.raise_open_files()
    result = {
        "name": NAME,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "levels": list(plan.levels),
        "tokens_per_stream": plan.tokens,
        "tps_per_stream": TPS,
        "first_token_delay_s": first_token_delay,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "variants": {},
        "floor": [],
        "relay": [],
        "first_frame": [],
        "idle_sockets": [],
    }
    began = time.perf_counter()
    global _STARTED
    _STARTED = began
    with (
        tempfile.TemporaryDirectory(prefix="loopdesk-bench-model-") as directory,
        servers.stamped_model(Path(directory), TPS, plan.tokens, first_token_delay) as model,
    ):
        progress("floor: the async SDK reading the model directly")
        for streams in plan.levels:
            result["floor"].append(measure_floor(model, plan, streams))
        ttft = asyncio.run(
            model_first_tokens(
                model.url,
                plan.short_message,
                plan.first_frame_turns,
                plan.first_frame_warm_up,
                plan.stream_seconds,
            )
        )
        first = [t.first_token_ns / 1e6 for t in ttft if t.first_token_ns]
        result["model_first_token"] = {"turns": len(ttft), **latency_summary(first)}
        progress("model's own time to first token measured")
        for variant in chosen:
            run_variant(variant, model, plan, result, result["model_first_token"])
        minimal = [v for v in chosen if v.name == servers.MINIMAL]
        if minimal and len(chosen) > 1 and not quick:
            run_variant(minimal[0], model, plan, result, result["model_first_token"], 2)
    result["total_seconds"] = round(time.perf_counter() - began, 1)
    return result


def format_table(result: dict) -> str:
    from bench.report import serving_tables

    return serving_tables(result)
