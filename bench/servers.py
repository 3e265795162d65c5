"""The processes of the serving benchmarks: the stamped model, the server variants, and
the readings taken of them from /proc.

A server variant is a list of command lines (the web server, plus any worker process) with
its environment. Each variant runs on its own, one after another, against ONE stamped-model
process, with the benchmark's readers in this process. A variant that fails to start is
skipped with a line saying why; the others still run.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import SQLAlchemyError

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
STARTUP_SECONDS = 60.0
SETUP_SECONDS = 120.0
POSTGRES_URL = os.environ.get(
    "BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
OPEN_FILES = 16_384  # 1,000 idle sockets and their peers need more than the usual 1,024


class SkipVariant(Exception):
    """The variant cannot run here (its service is unreachable, it failed to start)."""


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


def _child_setup() -> None:
    """Linux: the child gets SIGTERM if this process dies (even by SIGKILL), and may open
    as many sockets as the idle-socket benchmark needs."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)
    raise_open_files()


def raise_open_files() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES if hard == resource.RLIM_INFINITY else min(OPEN_FILES, hard)
    if soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def spawn(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_child_setup,
        )


def stop(process: subprocess.Popen | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def tail(log: Path, lines: int = 15) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    return ""


def wait_for_port(process: subprocess.Popen, port: int, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SkipVariant(f"{log.stem} exited ({process.returncode}): {tail(log, 5)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise SkipVariant(f"{log.stem} did not listen on port {port}: {tail(log, 5)}")


def wait_for_http(process: subprocess.Popen, url: str, log: Path) -> None:
    """Until the server answers HTTP at all (gunicorn listens before its worker is up)."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SkipVariant(f"{log.stem} exited ({process.returncode}): {tail(log, 5)}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except urllib.error.HTTPError:
            return  # any answer will do
        except OSError:
            time.sleep(0.1)
    raise SkipVariant(f"{log.stem} did not answer at {url}: {tail(log, 5)}")


# --- /proc readings ------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def process_tree(pids: list[int]) -> list[int]:
    """The given processes and all their descendants (alive now)."""
    seen: list[int] = []
    pending = list(pids)
    while pending:
        pid = pending.pop()
        if pid in seen or not Path(f"/proc/{pid}").exists():
            continue
        seen.append(pid)
        with contextlib.suppress(OSError):
            pending += children(pid)
    return seen


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (every thread), from /proc/<pid>/stat."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES


def thread_count(pid: int) -> int:
    return int(_stat_fields(pid)[17])


def machine_busy_seconds() -> float:
    """CPU seconds every CPU of the machine spent busy (all but idle and iowait), from
    /proc/stat: the model, the databases and the readers as well as the server."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def tree_cpu(pids: list[int]) -> dict[int, float]:
    readings = {}
    for pid in process_tree(pids):
        with contextlib.suppress(OSError):
            readings[pid] = cpu_seconds(pid)
    return readings


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two `tree_cpu` readings (a process born meanwhile from zero)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def tree_rss(pids: list[int]) -> int:
    total = 0
    for pid in process_tree(pids):
        with contextlib.suppress(OSError):
            total += rss_bytes(pid)
    return total


def tree_threads(pids: list[int]) -> int:
    total = 0
    for pid in process_tree(pids):
        with contextlib.suppress(OSError):
            total += thread_count(pid)
    return total


EXCEPTION_LINE = re.compile(r"^[\w.]*(?:Error|Exception|Exit)\b.*")
LEVEL_LINE = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b[\]:]?\s*(.*)")
# gunicorn's remark on `-c /dev/null` (the minimal relay runs without a config file).
IGNORED_LINES = ("configuration file should have a valid Python extension",)


def log_problems(log: Path) -> dict:
    """What went wrong in a server's log: tracebacks counted, their exception lines and
    the warnings and errors logged tallied (the five most common of each, numbers
    blanked so that one message repeated for many runs counts as one)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return {"tracebacks": 0, "exceptions": {}, "warnings": {}}
    exceptions = Counter(
        match.group(0)[:160] for line in lines if (match := EXCEPTION_LINE.match(line.strip()))
    )
    warnings = Counter(
        re.sub(r"\d+", "N", f"{match.group(1)} {match.group(2)}")[:160]
        for line in lines
        if (match := LEVEL_LINE.search(line)) and not any(x in line for x in IGNORED_LINES)
    )
    return {
        "tracebacks": sum(1 for line in lines if line.startswith("Traceback")),
        "exceptions": dict(exceptions.most_common(5)),
        "warnings": dict(warnings.most_common(5)),
    }


# --- databases for the app's variants ------------------------------------------------------


@contextlib.contextmanager
def sqlite_url(directory: Path) -> Iterator[str]:
    yield f"sqlite:///{directory / 'bench.db'}"


@contextlib.contextmanager
def postgres_url() -> Iterator[str]:
    """A fresh schema for one variant, dropped afterwards."""
    admin = create_engine(
        POSTGRES_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5}
    )
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    except (SQLAlchemyError, OSError) as error:
        admin.dispose()
        first_line = str(error).strip().splitlines()[0]
        raise SkipVariant(f"PostgreSQL unreachable ({first_line})") from error
    # The schema's name as the connections' application_name: pg_stat_activity counts them.
    scoped = make_url(POSTGRES_URL).update_query_dict(
        {"options": f"-csearch_path={schema}", "application_name": schema}
    )
    try:
        yield scoped.render_as_string(hide_password=False)
    finally:
        # Every server of the variant has stopped: nothing holds the schema any more.
        with contextlib.suppress(SQLAlchemyError), admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def check_redis() -> None:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except redis.RedisError as error:
        raise SkipVariant(f"Redis unreachable at {REDIS_URL} ({error})") from error


# --- server variants -----------------------------------------------------------------------


def gunicorn(target: str, config: str, processes: int = 1) -> Callable[[int], list[str]]:
    """`processes` gevent workers (one unless scaled out; monkey-patched by gunicorn
    before the app is imported), room for thousands of connections, quick to stop.
    `config`: the app's production config (gunicorn.conf.py, whose settings the flags here
    override), or /dev/null for none."""

    def command(port: int) -> list[str]:
        return [
            str(BIN / "gunicorn"),
            "-c",
            config,
            "-k",
            "gevent",
            "-w",
            str(processes),
            "--worker-connections",
            "4000",
            "--timeout",
            "120",
            "--graceful-timeout",
            "3",
            "--no-control-socket",
            "-b",
            f"127.0.0.1:{port}",
            target,
        ]

    return command


APP_GUNICORN = gunicorn("wsgi:app", str(ROOT / "gunicorn.conf.py"))


def flask_serve(port: int) -> list[str]:
    return [sys.executable, "-m", "flask", "--app", "wsgi", "serve"]


def make_run(port: int) -> list[str]:
    """`make run`'s own server (make_run.py: migrations, seed, gunicorn with one gevent
    worker forked from it), on HOST:PORT from the environment."""
    return [sys.executable, str(ROOT / "make_run.py")]


def flask_worker(port: int) -> list[str]:
    return [sys.executable, "-m", "flask", "--app", "wsgi", "worker"]


@dataclass(frozen=True)
class Variant:
    """One way of serving. `web` gives the web server's command line for a port; `workers`
    the command lines of other server processes (run executors) started beside it."""

    name: str
    label: str
    web: Callable[[int], list[str]]
    app: bool = True  # the Loopdesk app (migrations, accounts, tokens) or the minimal relay
    database: str = "sqlite"  # sqlite | postgresql | none
    redis: bool = False
    workers: tuple[Callable[[int], list[str]], ...] = ()
    env: dict = field(default_factory=dict)
    # Socket formats the relay is read in, each up to a number of concurrent streams.
    formats: tuple[tuple[str, int], ...] = (("json", 200),)
    relay: bool = True
    relay_levels: tuple[int, ...] | None = None  # only these stream counts (None: every level)
    first_frame: bool = True
    idle_sockets: int = 0  # idle sockets to hold open (0: not measured)


MINIMAL = "minimal"
MAKE_RUN = "make-run"
SCALED = "scaled"
SCALED_STREAMS = 400  # issue 36: 4 web processes and 2 Dramatiq workers at 400 streams
VARIANTS: tuple[Variant, ...] = (
    Variant(
        MINIMAL,
        "minimal relay (gunicorn, 1 gevent worker, no persistence)",
        gunicorn("bench.minimal_relay:app", "/dev/null"),
        app=False,
        database="none",
        formats=(("json", SCALED_STREAMS),),
        first_frame=False,
        idle_sockets=1_000,
    ),
    Variant(
        MAKE_RUN,
        "make run's default (make_run.py: gunicorn, 1 gevent worker, thread executor), SQLite",
        make_run,
        # Issue 22 judges its CPU at 20 and 100 streams; 200 is the gunicorn variant's.
        formats=(("json", 100),),
    ),
    Variant(
        "embedded",
        "Flask's threaded server (flask serve, MAKE_RUN_SERVER=flask), thread executor, SQLite",
        flask_serve,
        # htmx beside JSON where threads still cope (the htmx socket's cost is the same
        # on every server; gunicorn shows it at every level). JSON up to 100 streams, where
        # a thread per stream has already collapsed: 200 would only add a minute to the run.
        formats=(("json", 100), ("htmx", 20)),
        # Two OS threads per socket (FACTS.md): 1,000 idle sockets are 2,000 threads.
        idle_sockets=500,
    ),
    Variant(
        "gunicorn",
        "gunicorn, 1 gevent worker, thread executor (greenlets), SQLite",
        APP_GUNICORN,
        formats=(("json", 200), ("htmx", 200)),
        idle_sockets=1_000,
    ),
    Variant(
        "gunicorn-pg",
        "gunicorn, 1 gevent worker, thread executor (greenlets), PostgreSQL",
        APP_GUNICORN,
        database="postgresql",
    ),
    Variant(
        "embedded-pg",
        "Flask's threaded server (flask serve), PostgreSQL",
        flask_serve,
        database="postgresql",
        relay=False,
    ),
    # The scale-out deployment: runs in a Dramatiq worker, frames crossing Redis to the web
    # process. Skipped (with the reason) until `flask worker` and RUN_EXECUTOR=dramatiq exist.
    Variant(
        "dramatiq",
        "gunicorn (1 gevent worker) + flask worker (Dramatiq on Redis), PostgreSQL",
        APP_GUNICORN,
        database="postgresql",
        redis=True,
        workers=(flask_worker,),
        env={"RUN_EXECUTOR": "dramatiq"},
    ),
    # Many processes on one database (issue 36): 4 gunicorn workers, each a gevent worker
    # holding sockets, and 2 Dramatiq workers running the model calls; frames cross Redis.
    Variant(
        SCALED,
        "gunicorn (4 gevent workers) + 2 flask workers (Dramatiq on Redis), PostgreSQL",
        gunicorn("wsgi:app", str(ROOT / "gunicorn.conf.py"), processes=4),
        database="postgresql",
        redis=True,
        workers=(flask_worker, flask_worker),
        # Six pools on one PostgreSQL (100 connections by default), the setup's own beside.
        env={"RUN_EXECUTOR": "dramatiq", "DATABASE_POOL_SIZE": "12"},
        formats=(("json", SCALED_STREAMS),),
        relay_levels=(100, SCALED_STREAMS),
        first_frame=False,
    ),
)


def variant_names() -> tuple[str, ...]:
    return tuple(variant.name for variant in VARIANTS)


# --- a running variant ---------------------------------------------------------------------


@dataclass
class Model:
    process: subprocess.Popen
    url: str


MODEL_MAX_SECONDS = 900.0  # bench/stamped_model.py's own default


@contextlib.contextmanager
def stamped_model(
    directory: Path,
    tps: float,
    tokens: int,
    first_token_delay: float,
    max_seconds: float = MODEL_MAX_SECONDS,
):
    """The stamped model in its own process; it exits by itself after `max_seconds` (a
    benchmark that dies leaves no model behind), so a longer run must say how long."""
    port = free_port()
    log = directory / "model.log"
    args = [sys.executable, "-m", "bench.stamped_model", "--port", str(port)]
    args += ["--tps", str(tps), "--tokens", str(tokens)]
    args += ["--first-token-delay", str(first_token_delay), "--max-seconds", str(max_seconds)]
    process = spawn(args, dict(os.environ), log)
    try:
        wait_for_port(process, port, log)
        yield Model(process, f"http://127.0.0.1:{port}")
    finally:
        stop(process)


@dataclass
class Server:
    variant: Variant
    url: str
    processes: list[subprocess.Popen]
    tokens: list[str]
    setup_seconds: float
    log: Path
    database: str = ""

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def token(self, index: int) -> str:
        return self.tokens[index % len(self.tokens)] if self.tokens else "minimal"

    def alive(self) -> bool:
        return all(process.poll() is None for process in self.processes)


def app_env(variant: Variant, directory: Path, model_url: str, port: int, database: str) -> dict:
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in {
            "DATABASE_URL",
            "REDIS_URL",
            "REDIS_PREFIX",
            "RUN_EXECUTOR",
            "RUN_QUEUE",
            "SECRET_KEY",
        }
    }
    env.update(
        INSTANCE_PATH=str(directory / "instance"),
        DATABASE_URL=database,
        MODEL_PROVIDER="anthropic",
        ANTHROPIC_BASE_URL=model_url,
        ANTHROPIC_API_KEY="bench",
        RUN_EXECUTOR="thread",
        # Room for every stream of the largest level to run at once, in the web process
        # (thread executor: threads, or greenlets under gunicorn's gevent worker) or in
        # the worker (Dramatiq).
        RUN_THREADS="256",
        WORKER_THREADS="256",
        # One person per stream already; these keep a level's burst of runs from being
        # refused if streams ever share an account.
        MAX_CONCURRENT_RUNS="1000",
        RATE_LIMIT_MESSAGES="100000 per minute",
        # The benchmarks measure turns; naming each chat after its first one would add a
        # structured call the stamped model does not answer.
        CHAT_TITLES="false",
        PORT=str(port),
        HOST="127.0.0.1",
        FLASK_DEBUG="0",
    )
    if variant.redis:
        # Keys, channels and the queue of this variant alone: tests may share the Redis.
        env.update(
            REDIS_URL=REDIS_URL,
            REDIS_PREFIX=f"{directory.name}:",
            RUN_QUEUE=f"{directory.name}-runs",
        )
    env.update(variant.env)
    return env


def app_setup(env: dict, users: int, log: Path) -> list[str]:
    """Migrations, one account per stream, a token each (`bench.app_setup`)."""
    with log.open("ab") as errors:
        completed = subprocess.run(
            [sys.executable, "-m", "bench.app_setup", "--users", str(users)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            timeout=SETUP_SECONDS,
            preexec_fn=_child_setup,
        )
    if completed.returncode != 0:
        raise SkipVariant(f"app setup failed ({completed.returncode}): {tail(log, 5)}")
    return json.loads(completed.stdout.decode().strip().splitlines()[-1])["tokens"]


@contextlib.contextmanager
def database_for(variant: Variant, directory: Path) -> Iterator[str]:
    if variant.database == "postgresql":
        with postgres_url() as url:
            yield url
    else:
        with sqlite_url(directory) as url:
            yield url


@contextlib.contextmanager
def serve(variant: Variant, model: Model, users: int) -> Iterator[Server]:
    """Start the variant (raising `SkipVariant` when it cannot run) and stop it after."""
    began = time.perf_counter()
    processes: list[subprocess.Popen] = []
    with (
        tempfile.TemporaryDirectory(prefix=f"loopdesk-bench-{variant.name}-") as name,
        database_for(variant, Path(name)) as database,
    ):
        directory = Path(name)
        try:
            if variant.redis:
                check_redis()
            port = free_port()
            log = directory / f"{variant.name}.log"
            tokens: list[str] = []
            if variant.app:
                env = app_env(variant, directory, model.url, port, database)
                tokens = app_setup(env, users, log)
            else:
                env = {**os.environ, "ANTHROPIC_BASE_URL": model.url}
            processes.append(spawn(variant.web(port), env, log))
            for worker in variant.workers:
                processes.append(spawn(worker(port), env, log))
            url = f"http://127.0.0.1:{port}"
            wait_for_port(processes[0], port, log)
            wait_for_http(processes[0], f"{url}/login" if variant.app else f"{url}/", log)
            time.sleep(0.5)
            for process in processes[1:]:
                if process.poll() is not None:
                    raise SkipVariant(f"a worker exited ({process.returncode}): {tail(log, 5)}")
            took = time.perf_counter() - began
            yield Server(variant, url, processes, tokens, took, log, database)
        finally:
            for process in reversed(processes):
                stop(process)
