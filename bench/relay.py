"""Per-token latency of model text relayed through the real server, against reading the
model directly.

Three processes: the stamped model (`bench.stamped_model`, whose every token is its send
time), the server (`flask --app wsgi serve`: werkzeug's threaded server, runs on the thread
executor, model reached through `ANTHROPIC_BASE_URL`, SQLite in a temp dir) and this one,
which reads C concurrent streams on one asyncio loop (`bench.relay_client`):

- relay: per stream a chat, its JSON socket, `POST /loop`; latency of every token from the
  model's write to the `textDelta` frame's arrival here;
- floor: the same C streams read straight from the model by `anthropic.AsyncAnthropic`.

The server's CPU (utime + stime from /proc) over the relay's streaming is reported per
1,000 tokens delivered, with the model's and this process's for context. A stream that
fails (HTTP error, socket closed, no `done` in time) is counted, not fatal, unless every
stream of a level fails. The processes are terminated (then killed) and the temp dir
removed whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.relay_client import Tally, floor_streams, relay_streams

NAME = "relay"
ROOT = Path(__file__).resolve().parent.parent
LEVELS = (1, 20, 100, 200)
QUICK_LEVELS = (1, 5)
TOKENS = 300  # ~5 s of streaming at 60 tokens/s
QUICK_TOKENS = 60
TPS = 60.0
FIRST_TOKEN_DELAY = 0.0
GRACE_SECONDS = 30.0  # beyond the stream's own length, before a stream counts as timed out
QUICK_GRACE_SECONDS = 15.0
STARTUP_SECONDS = 30.0
CLI_SECONDS = 60.0
EMAIL = "relay-bench@example.com"
PASSWORD = "relay-bench-password"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SAMPLE_SECONDS = 0.2
MAX_SAMPLES = 3_000  # ten minutes of samples, whatever happens


# --- processes -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _libc_prctl():
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl
    return None


_PRCTL = _libc_prctl()  # looked up here: the child between fork and exec only calls it
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM if this process dies (even by SIGKILL)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )


def stop(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def tail(log: Path, lines: int = 20) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    return ""


def wait_for_port(process: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{log.stem} exited ({process.returncode}):\n{tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{log.stem} did not listen on port {port}:\n{tail(log)}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (every thread), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def thread_count(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


@dataclass
class Stack:
    model: subprocess.Popen
    model_url: str
    server: subprocess.Popen
    server_url: str
    token: str

    def pids(self) -> dict[str, int]:
        return {"server": self.server.pid, "model": self.model.pid, "client": os.getpid()}


def server_env(directory: Path, model_url: str, port: int) -> dict:
    return {
        **os.environ,
        "INSTANCE_PATH": str(directory / "instance"),
        "DATABASE_URL": f"sqlite:///{directory / 'bench.db'}",
        "MODEL_PROVIDER": "anthropic",
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "bench",
        "RUN_EXECUTOR": "thread",
        "RUN_THREADS": "256",
        "RATE_LIMIT_MESSAGES": "100000 per minute",
        "REDIS_URL": "",
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "FLASK_DEBUG": "0",
    }


def flask(env: dict, *args: str) -> str:
    """One `flask --app wsgi ...` command; its stdout."""
    completed = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "wsgi", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_SECONDS,
        preexec_fn=_die_with_parent,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"flask {' '.join(args)} failed:\n{completed.stderr[-2000:]}")
    return completed.stdout


def start_model(directory: Path, tokens: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    args = ["--port", str(port), "--tps", str(TPS), "--tokens", str(tokens)]
    args += ["--first-token-delay", str(FIRST_TOKEN_DELAY)]
    log = directory / "model.log"
    process = spawn([sys.executable, "-m", "bench.stamped_model", *args], dict(os.environ), log)
    try:
        wait_for_port(process, port, log)
    except BaseException:
        stop(process)
        raise
    return process, f"http://127.0.0.1:{port}"


def start_server(directory: Path, model_url: str) -> tuple[subprocess.Popen, str, str]:
    port = free_port()
    env = server_env(directory, model_url, port)
    flask(env, "db", "upgrade")
    log = directory / "server.log"
    process = spawn([sys.executable, "-m", "flask", "--app", "wsgi", "serve"], env, log)
    try:
        # Each command imports the app (seconds): the account is made while the server starts.
        flask(env, "create-user", EMAIL, "--password", PASSWORD)
        token = flask(env, "create-token", EMAIL).strip().splitlines()[-1]
        wait_for_port(process, port, log)
    except BaseException:
        stop(process)
        raise
    return process, f"http://127.0.0.1:{port}", token


@contextlib.contextmanager
def stack(tokens: int) -> Iterator[Stack]:
    model = server = None
    with tempfile.TemporaryDirectory(prefix="loopdesk-relay-") as name:
        try:
            model, model_url = start_model(Path(name), tokens)
            server, server_url, token = start_server(Path(name), model_url)
            yield Stack(model, model_url, server, server_url, token)
        finally:
            stop(server)
            stop(model)


# --- measuring -----------------------------------------------------------------------------


class CpuWindow:
    """CPU seconds of each process over a window; with `threads_of`, also that process's
    peak thread count, sampled every `SAMPLE_SECONDS` by a helper thread."""

    def __init__(self, pids: dict[str, int], threads_of: int | None = None):
        self.pids = pids
        self.threads_of = threads_of
        self.before: dict[str, float] = {}
        self.used: dict[str, float] = {}
        self.began = self.seconds = 0.0
        self.peak_threads = 0
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def start(self) -> None:
        if self.threads_of is not None:
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        self.began = time.perf_counter()
        self.before = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def end(self) -> None:
        self.seconds = time.perf_counter() - self.began
        self.used = {name: cpu_seconds(pid) - self.before[name] for name, pid in self.pids.items()}
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=5)

    def _sample(self) -> None:
        for _ in range(MAX_SAMPLES):
            with contextlib.suppress(OSError):
                self.peak_threads = max(self.peak_threads, thread_count(self.threads_of))
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


def summarize(tallies: list[Tally], tokens: int, cpu: CpuWindow) -> dict:
    latencies = [ns / 1e6 for tally in tallies for ns in tally.latencies_ns]
    delivered = sum(tally.tokens for tally in tallies)
    errors = Counter(tally.error for tally in tallies if tally.error)
    rates = [rate for rate in map(per_stream_tps, tallies) if rate]
    summary = {
        "streams": len(tallies),
        "completed": sum(1 for tally in tallies if tally.done and not tally.error),
        "errors": dict(errors),
        "tokens_delivered": delivered,
        "tokens_expected": len(tallies) * tokens,
        "seconds": round(cpu.seconds, 2),
        "model_tps_per_stream_p50": round(statistics.median(rates), 1) if rates else None,
        "peak_concurrent_streams": peak_concurrency(tallies),
        "token_frames": sum(tally.token_frames for tally in tallies),
        "other_frames": sum(tally.other_frames for tally in tallies),
    }
    first = [tally.first_token_ns / 1e6 for tally in tallies if tally.first_token_ns]
    if first:
        summary["first_token_p50_ms"] = round(statistics.median(first), 1)
        summary["first_token_max_ms"] = round(max(first), 1)
    if latencies:
        summary |= {
            "p50_ms": round(statistics.median(latencies), 3),
            "p90_ms": round(percentile(latencies, 0.90), 3),
            "p99_ms": round(percentile(latencies, 0.99), 3),
            "max_ms": round(max(latencies), 3),
            "mean_ms": round(statistics.fmean(latencies), 3),
        }
    for name, used in cpu.used.items():
        summary[f"{name}_cpu_ms_per_1k_tokens"] = (
            round(used * 1e6 / delivered, 1) if delivered else None
        )
        summary[f"{name}_cpu_percent"] = round(100 * used / cpu.seconds, 1) if cpu.seconds else 0
    if not summary["completed"]:
        raise RuntimeError(f"every stream failed ({len(tallies)} streams): {dict(errors)}")
    return summary


def measure_floor(setup: Stack, streams: int, tokens: int, grace: float) -> dict:
    cpu = CpuWindow({"model": setup.model.pid, "client": os.getpid()})
    seconds = tokens / TPS + grace
    tallies = asyncio.run(floor_streams(setup.model_url, streams, seconds, cpu.start, cpu.end))
    return summarize(tallies, tokens, cpu)


def measure_relay(setup: Stack, streams: int, tokens: int, grace: float) -> dict:
    cpu = CpuWindow(setup.pids(), threads_of=setup.server.pid)
    seconds = tokens / TPS + grace
    subscribe_wait = 0.2 + 0.002 * streams
    idle_threads = thread_count(setup.server.pid)
    try:
        tallies = asyncio.run(
            relay_streams(
                setup.server_url, setup.token, streams, seconds, subscribe_wait, cpu.start, cpu.end
            )
        )
    finally:
        cpu.close()
    summary = summarize(tallies, tokens, cpu)
    summary["server_threads"] = {"before": idle_threads, "peak": cpu.peak_threads}
    return summary


def measure_level(setup: Stack, streams: int, tokens: int, grace: float) -> dict:
    load = [round(os.getloadavg()[0], 2)]
    floor = measure_floor(setup, streams, tokens, grace)
    relay = measure_relay(setup, streams, tokens, grace)
    load.append(round(os.getloadavg()[0], 2))
    ratio = relay.get("p99_ms", 0) / floor["p99_ms"] if floor.get("p99_ms") else None
    return {
        "streams": streams,
        "tokens_per_stream": tokens,
        "relay": relay,
        "floor": floor,
        "p99_ratio": round(ratio, 2) if ratio else None,
        "load_average_1m": load,  # the machine's, before and after the level
    }


# --- entry points --------------------------------------------------------------------------


def run(*, quick: bool = False, databases=(), rows: int | None = None) -> dict:
    """`databases` and `rows` are the harness's options for the database benchmarks; the
    server here always runs on a SQLite file in a temp dir."""
    levels = QUICK_LEVELS if quick else LEVELS
    tokens = QUICK_TOKENS if quick else TOKENS
    grace = QUICK_GRACE_SECONDS if quick else GRACE_SECONDS
    result = {
        "name": NAME,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "levels": list(levels),
        "tokens_per_stream": tokens,
        "tps_per_stream": TPS,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "server": "flask --app wsgi serve (werkzeug threaded), RUN_THREADS=256, SQLite",
        "cases": [],
    }
    began = time.perf_counter()
    with stack(tokens) as setup:
        result["setup_seconds"] = round(time.perf_counter() - began, 2)
        for streams in levels:
            print(f"  {streams} stream(s)...", flush=True)
            result["cases"].append(measure_level(setup, streams, tokens, grace))
    result["total_seconds"] = round(time.perf_counter() - began, 2)
    return result


COLUMNS = (
    "streams",
    "relay p50 ms",
    "relay p99 ms",
    "floor p50 ms",
    "floor p99 ms",
    "p99 ratio (relay/floor)",
    "server CPU ms per 1k tokens",
    "tokens delivered / expected",
)


def _ms(value) -> str:
    return "-" if value is None else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _row(case: dict) -> list[str]:
    relay, floor = case["relay"], case["floor"]
    return [
        str(case["streams"]),
        _ms(relay.get("p50_ms")),
        _ms(relay.get("p99_ms")),
        _ms(floor.get("p50_ms")),
        _ms(floor.get("p99_ms")),
        "-" if case["p99_ratio"] is None else f"{case['p99_ratio']:.1f}",
        _ms(relay["server_cpu_ms_per_1k_tokens"]),
        f"{relay['tokens_delivered']:,} / {relay['tokens_expected']:,}",
    ]


def _level_notes(case: dict) -> list[str]:
    relay, floor, streams = case["relay"], case["floor"], case["streams"]
    per_frame = relay["tokens_delivered"] / max(1, relay["token_frames"])
    load = case["load_average_1m"]
    return [
        f"{streams} stream(s): server {relay['server_cpu_percent']}% of a core, "
        f"{relay['server_threads']['peak']} threads at peak; at most "
        f"{relay['peak_concurrent_streams']} streams sending at once "
        f"(floor {floor['peak_concurrent_streams']}); first token "
        f"p50 {relay.get('first_token_p50_ms')} ms, max {relay.get('first_token_max_ms')} ms "
        f"after POST /loop (floor {floor.get('first_token_p50_ms')}, "
        f"{floor.get('first_token_max_ms')}); load average {load[0]} -> {load[1]}",
        f"    CPU ms per 1k tokens: model {relay['model_cpu_ms_per_1k_tokens']} (relay), "
        f"{floor['model_cpu_ms_per_1k_tokens']} (floor); readers "
        f"{relay['client_cpu_ms_per_1k_tokens']} (sockets), "
        f"{floor['client_cpu_ms_per_1k_tokens']} (SDK); {per_frame:.2f} tokens per "
        f"textDelta frame, {relay['other_frames'] / streams:.0f} other frames per socket; "
        f"model pace p50 {relay['model_tps_per_stream_p50']} tokens/s per stream",
    ]


def _failure_notes(case: dict) -> list[str]:
    notes = []
    for label in ("relay", "floor"):
        part = case[label]
        if part["errors"] or part["tokens_delivered"] != part["tokens_expected"]:
            notes.append(
                f"{case['streams']} stream(s), {label}: "
                f"{part['completed']}/{part['streams']} completed, "
                f"{part['tokens_delivered']:,}/{part['tokens_expected']:,} tokens, "
                f"errors {part['errors'] or 'none'}"
            )
    return notes


def _notes(result: dict) -> list[str]:
    notes = [note for case in result["cases"] for note in _level_notes(case)]
    notes += [note for case in result["cases"] for note in _failure_notes(case)]
    notes.append(
        f"{result['tokens_per_stream']} tokens per stream at {result['tps_per_stream']:.0f} "
        f"tokens/s, every stream's request sent at once; {result['server']}; "
        f"{result['cpus']} CPUs. Latency: the model's write of a token to its arrival "
        "here. Floor: the same streams read by anthropic.AsyncAnthropic on one loop, no "
        "relay. CPU over the streaming window (loop POSTs to the last done frame)."
    )
    return notes


def format_table(result: dict) -> str:
    body = [_row(case) for case in result["cases"]]
    widths = [max(len(row[i]) for row in [COLUMNS, *body]) for i in range(len(COLUMNS))]

    def line(cells):
        return "| " + " | ".join(cell.rjust(widths[i]) for i, cell in enumerate(cells)) + " |"

    lines = [line(COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [line(row) for row in body]
    return "\n".join(lines + [""] + _notes(result))
