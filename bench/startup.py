"""`make run` started again on a set-up checkout (warm: the environment installed, the
database migrated and seeded), from the command to its first answered request, against
one bare import of the app (`python -c "import wsgi"`, from process start to the import
done; its exit is not counted).

`make -s run` runs as a newcomer types it (make's up-to-date checks included) with its own
INSTANCE_PATH and PORT, in its own process group; the first start (cold: migrations and
the demo seed) is timed too but not judged. The warm starts and the bare imports take
turns, so that load on the machine weighs on both alike; the medians are compared.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from bench.servers import ROOT, free_port

NAME = "startup"
ROUNDS, QUICK_ROUNDS = 3, 1
START_SECONDS = 120.0


def bare_import_seconds(env: dict) -> float:
    """From spawning the interpreter to `import wsgi` done (its exit is not counted)."""
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", "import wsgi; print('imported', flush=True)"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    line = process.stdout.readline()
    seconds = time.perf_counter() - began
    process.wait(timeout=60)
    if line.strip() != b"imported":
        raise RuntimeError("importing the app failed")
    return seconds


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except urllib.error.HTTPError:
        return True  # any answer is a response
    except OSError:
        return False


def make_run_seconds(env: dict, log: Path) -> dict:
    """From spawning `make -s run` to the first answered GET /login; then stopped."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/login"
    began = time.perf_counter()
    with log.open("ab") as out:
        process = subprocess.Popen(
            ["make", "-s", "run"],
            cwd=ROOT,
            env={**env, "PORT": str(port), "HOST": "127.0.0.1"},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        while not _answers(url):
            if process.poll() is not None or time.perf_counter() - began > START_SECONDS:
                raise RuntimeError(f"make run did not serve: {log.read_text()[-800:]}")
            time.sleep(0.02)
        seconds = time.perf_counter() - began
        server = (urllib.request.urlopen(url, timeout=5).headers.get("Server") or "").split("/")[0]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return {"seconds": seconds, "server": server}


def run(*, quick: bool = False, **_options) -> dict:
    rounds = QUICK_ROUNDS if quick else ROUNDS
    result = {
        "name": NAME,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "python": platform.python_version(),
        "rounds": rounds,
    }
    with tempfile.TemporaryDirectory(prefix="loopdesk-bench-startup-") as name:
        directory = Path(name)
        drop = {"DATABASE_URL", "REDIS_URL", "RUN_EXECUTOR", "ANTHROPIC_BASE_URL"}
        env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MAKE")}
        env.update(INSTANCE_PATH=str(directory / "instance"), FLASK_DEBUG="0")
        log = directory / "make-run.log"
        cold = make_run_seconds(env, log)
        warm, bare = [], []
        for _ in range(rounds):
            warm.append(make_run_seconds(env, log)["seconds"])
            bare.append(bare_import_seconds(env))
    result.update(
        cold_seconds=round(cold["seconds"], 3),
        server=cold["server"],
        warm_seconds=[round(s, 3) for s in warm],
        bare_import_seconds=[round(s, 3) for s in bare],
        warm_median_seconds=round(statistics.median(warm), 3),
        bare_import_median_seconds=round(statistics.median(bare), 3),
    )
    result["ratio"] = round(result["warm_median_seconds"] / result["bare_import_median_seconds"], 2)
    return result


def format_table(result: dict) -> str:
    from bench.report import startup_table

    return startup_table(result)
