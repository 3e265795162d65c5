"""The soak's driver: a server setup and the stamped model, Locust headless in its own
process, and this process reading every server process from /proc meanwhile.

    python -m bench.soak --minutes 30 --setup make-run,scaled

Per setup: `make-run` (make_run.py: gunicorn, one gevent worker, thread executor, SQLite)
or `scaled` (gunicorn + `flask worker`, Dramatiq on Redis, PostgreSQL): the same servers
as `make bench` (bench/servers.py). Every `SAMPLE_SECONDS`: each server process's RSS and
open files (/proc/<pid>/fd), and the database connections: on PostgreSQL the rows of
pg_stat_activity with the setup's own application_name, on SQLite each process's open
handles on the database's files. Then the verdict (bench/soak/judge.py), its table, the
verdict in `bench/soak-last.json` (committed: docs/benchmarks.md's "Soak" section is
drawn from it on every regeneration) and that section rewritten in place; every request
and reading in `bench/results/soak-<setup>-*` (git-ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

from bench import servers
from bench.soak import judge

# "scaled": issue 36's many processes on one database (4 web processes, 2 Dramatiq workers).
SETUPS = {"make-run": servers.MAKE_RUN, "scaled": servers.SCALED}
SAMPLE_SECONDS = 5.0
LOCUSTFILE = Path(__file__).with_name("locustfile.py")
LAST = servers.ROOT / "bench" / "soak-last.json"
RESULTS = servers.ROOT / "bench" / "results"
DOCS = servers.ROOT / "docs" / "benchmarks.md"


def process_label(pid: int, roots: list[int]) -> str:
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    words = [arg.decode(errors="replace") for arg in args if arg]
    program = Path(words[0]).name if words else "?"
    if program.startswith("python") and len(words) > 1:
        program = " ".join(Path(word).name for word in words[1:5] if not word.startswith("-"))
    role = "" if pid in roots else " (child)"
    return f"{program[:40]}{role} pid {pid}"


def database_handles(pid: int, database: str) -> int:
    """Open handles of a process on the SQLite database's files (db, -wal, -shm)."""
    path = make_url(database).database or ""
    count = 0
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(entry).startswith(path)
    return count


class Sampler(threading.Thread):
    """Reads every server process every `SAMPLE_SECONDS` until stopped."""

    def __init__(self, server: servers.Server):
        super().__init__(daemon=True)
        self.server = server
        self.readings: list[dict] = []
        self.stopping = threading.Event()
        url = make_url(server.database)
        self.postgres = None
        if url.get_backend_name() == "postgresql":
            self.application = url.query["application_name"]
            self.postgres = create_engine(servers.POSTGRES_URL, pool_size=1)

    def postgres_connections(self) -> int | None:
        if self.postgres is None:
            return None
        with self.postgres.connect() as connection:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"
            return connection.execute(text(query), {"name": self.application}).scalar_one()

    def sample(self) -> None:
        at = time.time()
        pooled = self.postgres_connections()
        if pooled is not None:
            self.readings.append(
                {"at": at, "process": "PostgreSQL (all processes)", "connections": pooled}
            )
        for pid in servers.process_tree(self.server.pids):
            with contextlib.suppress(OSError):
                reading = {
                    "at": at,
                    "process": process_label(pid, self.server.pids),
                    "rss": servers.rss_bytes(pid),
                    "fds": len(os.listdir(f"/proc/{pid}/fd")),
                }
                if self.postgres is None:
                    reading["connections"] = database_handles(pid, self.server.database)
                self.readings.append(reading)

    def run(self) -> None:
        while not self.stopping.wait(SAMPLE_SECONDS):
            self.sample()

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        if self.postgres is not None:
            self.postgres.dispose()


def read_requests(path: Path) -> list[dict]:
    requests = []
    for line in path.read_text().splitlines():
        at, kind, name, ms, error = (line.split("\t") + [""])[:5]
        requests.append(
            {"at": float(at), "kind": kind, "name": name, "ms": float(ms), "error": error}
        )
    return requests


def locust(server: servers.Server, directory: Path, args: argparse.Namespace) -> Path:
    """Locust headless for the run's length; the samples file it wrote."""
    tokens = directory / "tokens.json"
    tokens.write_text(json.dumps(server.tokens))
    samples = directory / "requests.tsv"
    users = args.http_users + args.socket_users
    env = {
        **os.environ,
        "SOAK_TOKENS": str(tokens),
        "SOAK_SAMPLES": str(samples),
        "SOAK_HTTP_USERS": str(args.http_users),
        "SOAK_SOCKET_USERS": str(args.socket_users),
        "SOAK_HTTP_RATE": str(args.http_rate),
        "SOAK_SOCKET_RATE": str(args.socket_rate),
    }
    command = [str(servers.BIN / "locust"), "-f", str(LOCUSTFILE), "--headless"]
    command += ["-u", str(users), "-r", str(users), "-t", f"{round(args.minutes * 60)}s"]
    command += ["--host", server.url, "--csv", str(directory / "locust"), "--only-summary"]
    command += ["--stop-timeout", "30", "--loglevel", "WARNING"]
    log = directory / "locust.log"
    with log.open("ab") as out:
        subprocess.run(
            command, cwd=servers.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    print(servers.tail(log, 30), flush=True)
    return samples


def soak_setup(name: str, model: servers.Model, directory: Path, args: argparse.Namespace) -> dict:
    variant = next(v for v in servers.VARIANTS if v.name == SETUPS[name])
    users = args.http_users + args.socket_users
    load = os.getloadavg()[0]
    with servers.serve(variant, model, users) as server:
        sampler = Sampler(server)
        sampler.sample()
        sampler.start()
        try:
            samples = locust(server, directory, args)
        finally:
            sampler.stop()
        alive = server.alive()
        problems = servers.log_problems(server.log)
    # Every request and reading, beside make bench's results (git-ignored).
    RESULTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(samples, RESULTS / f"soak-{name}-requests.tsv")
    (RESULTS / f"soak-{name}-readings.json").write_text(json.dumps(sampler.readings))
    requests = read_requests(samples)
    if not requests:
        raise servers.SkipVariant("Locust recorded no request (see its log above)")
    start, end = requests[0]["at"], requests[-1]["at"]
    return {
        "label": variant.label,
        "alive_at_end": alive,
        "log": problems,
        "load_average_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
        "verdict": judge.verdict(requests, sampler.readings, start, end, users),
    }


def write_docs(soak: dict, path: Path = DOCS) -> None:
    """Rewrite the "## Soak" section in place (or add it at the end)."""
    section = "\n".join(judge.markdown(soak)).rstrip() + "\n"
    current = path.read_text() if path.exists() else ""
    head, marker, rest = current.partition("\n## Soak\n")
    if marker:
        following = rest.find("\n## ")
        tail = rest[following + 1 :] if following >= 0 else ""
        path.write_text(f"{head}\n{section}\n{tail}".rstrip() + "\n")
    else:
        path.write_text(f"{current.rstrip()}\n\n{section}")


def locust_version() -> str:
    done = subprocess.run(
        [str(servers.BIN / "locust"), "--version"], capture_output=True, text=True, check=False
    )
    words = (done.stdout or done.stderr).split()
    return words[1] if len(words) > 1 else "?"


# Per setup, beyond its soak: starting its servers, warming up, stopping, judging.
SETUP_ALLOWANCE_SECONDS = 600.0


def model_lifetime(args: argparse.Namespace) -> float:
    """How long the one model must live: every setup's soak, one after another. (Its own
    default, 15 minutes, ended a 30-minute soak half-way: every turn after it failed.)"""
    return len(args.setup) * (args.minutes * 60 + SETUP_ALLOWANCE_SECONDS)


def run(args: argparse.Namespace) -> dict:
    import tempfile

    servers.raise_open_files()
    soak = {
        "started_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "minutes": args.minutes,
        "locust": locust_version(),
        "http_users": args.http_users,
        "socket_users": args.socket_users,
        "http_rate": args.http_rate,
        "socket_rate": args.socket_rate,
        "setups": {},
    }
    with tempfile.TemporaryDirectory(prefix="loopdesk-soak-") as name:
        directory = Path(name)
        with servers.stamped_model(
            directory, tps=60, tokens=30, first_token_delay=0.1, max_seconds=model_lifetime(args)
        ) as model:
            for setup in args.setup:
                print(f"== soak: {setup}, {args.minutes:g} min ==", flush=True)
                place = directory / setup
                place.mkdir()
                try:
                    soak["setups"][setup] = soak_setup(setup, model, place, args)
                except servers.SkipVariant as reason:
                    soak["setups"][setup] = {"skipped": str(reason)}
                print(
                    "\n".join(
                        judge.markdown({**soak, "setups": {setup: soak["setups"][setup]}})[4:]
                    ),
                    flush=True,
                )
    return soak
