"""`make run`: one process migrates, seeds the demo and serves; with gevent importable
it serves with gunicorn (one gevent worker, as in production), and a run on the
in-process thread executor answers under it."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.factories import csrf_token_from
from tests.ports import free_port
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parent.parent
STARTUP_SECONDS = 90


def _make_run_command() -> list[str]:
    """The last line of the Makefile's `run` recipe, with the project's Python."""
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe, "no run target in the Makefile"
    line = recipe.group(1).strip().splitlines()[-1].strip()
    return shlex.split(line.replace("$(PY)", sys.executable))


def _gevent_works() -> bool:
    try:
        import gevent  # noqa: F401
        import gunicorn.workers.ggevent  # noqa: F401
    except ImportError:
        return False
    return True


DATABASES: dict[str, Path] = {}


def make_run_database(url: str) -> Path:
    """The SQLite file of the `make run` serving at `url`."""
    return DATABASES[url]


@contextlib.contextmanager
def started_make_run(directory: Path, extra_env: dict[str, str]):
    """`make run` serving on a free port, its data in `directory`; yields its URL. The
    process's output is in `directory / "make-run.log"`."""
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "RUN_EXECUTOR", "MODEL_PROVIDER"}
        and key not in {"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"}
    }
    env.update(INSTANCE_PATH=str(directory / "instance"), HOST="127.0.0.1", PORT=str(port))
    env.update(extra_env)
    log_path = directory / "make-run.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        _make_run_command(), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    DATABASES[url] = directory / "instance" / "loopdesk.db"

    def serving() -> bool:
        assert process.poll() is None, log_path.read_text()
        try:
            requests.get(f"{url}/login", timeout=5)
        except requests.ConnectionError:
            return False
        return True

    try:
        eventually(serving, STARTUP_SECONDS, "make run did not serve in time")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def demo_login(url: str) -> tuple[requests.Session, dict[str, str]]:
    """A browser session as the demo account `make run` seeds, and its CSRF header."""
    browser = requests.Session()
    page = browser.get(f"{url}/login", timeout=10)
    login = browser.post(
        f"{url}/login",
        data={
            "csrf_token": csrf_token_from(page.text),
            "email": "demo@loopdesk.local",
            "password": "loopdesk-demo",
        },
        timeout=10,
    )
    assert login.status_code == 200 and login.url.rstrip("/") != f"{url}/login"
    return browser, {"X-CSRFToken": csrf_token_from(login.text)}


@pytest.fixture
def make_run(tmp_path, request):
    with started_make_run(tmp_path, getattr(request, "param", {})) as url:
        yield url


METRICS_PORT = free_port()


# With the console exporter, the spans print on make run's own output (app/telemetry).
@pytest.mark.parametrize(
    "make_run",
    [{"METRICS_ADDRESS": f"127.0.0.1:{METRICS_PORT}", "OTEL_TRACES_EXPORTER": "console"}],
    indirect=True,
)
def test_make_run_serves_the_login_page_with_gunicorn_and_answers_the_demo(make_run, tmp_path):
    page = requests.get(f"{make_run}/login", timeout=10)

    assert page.status_code == 200
    assert "Log in" in page.text
    if _gevent_works():
        assert page.headers.get("Server", "").startswith("gunicorn")
    # The demo account the same process seeded logs in, and a run on the thread executor
    # (greenlets under the gevent worker) writes the demo model's reply.
    browser, token = demo_login(make_run)
    chat = browser.post(f"{make_run}/api/chats", json={}, headers=token, timeout=10).json()["id"]
    started = browser.post(
        f"{make_run}/api/chats/{chat}/loop", json={"message": "Hello"}, headers=token, timeout=10
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["runId"]

    def ended() -> str | None:
        status = browser.get(f"{make_run}/api/runs/{run_id}", timeout=10).json()["status"]
        return status if status not in {"queued", "running"} else None

    status = eventually(ended, 30, "the demo run did not end")
    assert status in {"completed", "awaiting"}  # the demo may end on a question card
    rows = browser.get(f"{make_run}/api/chats/{chat}/messages", timeout=10).json()
    assert any(row["role"] == "assistant" for row in rows["messages"])
    # The run is counted where it ran (the worker), read by /metrics (the demo account is
    # an admin) and by the master on METRICS_ADDRESS without a login: one sum of files.
    counted = f'loopdesk_runs_total{{status="{status}"}} 1.0'
    assert counted in browser.get(f"{make_run}/metrics", timeout=10).text
    assert counted in requests.get(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).text
    # The run's span ends just after its status is written: printed when it ends.
    names = ("GET /login", "POST /api/chats/<int:conversation_id>/loop", "invoke_agent loopdesk")
    printed = (tmp_path / "make-run.log").read_text
    eventually(lambda: all(f'"name": "{n}"' in printed() for n in names), 10, "no spans printed")
    assert '"name": "chat loopdesk-demo"' in printed()

    # The process's own scheduler sends a scheduled message once it is due (made due here
    # in the database: its next pass is at most 15 s away).
    made = browser.post(
        f"{make_run}/api/chats/{chat}/schedules",
        json={"cron": "0 9 * * *", "message": "Scheduled hello"},
        headers=token,
        timeout=10,
    )
    assert made.status_code == 201, made.text
    database = sqlite3.connect(make_run_database(make_run), timeout=10)
    with database:
        database.execute("UPDATE chat_schedules SET next_run_at = '2020-01-01 00:00:00.000000'")
    database.close()

    def scheduled_row() -> bool:
        rows = browser.get(f"{make_run}/api/chats/{chat}/messages", timeout=10).json()
        return any(row["content"] == "Scheduled hello" for row in rows["messages"])

    eventually(scheduled_row, 40, "the scheduled message was not sent")


@pytest.mark.parametrize("make_run", [{"MAKE_RUN_SERVER": "flask"}], indirect=True)
def test_make_run_serves_with_flasks_threaded_server_when_set(make_run):
    page = requests.get(f"{make_run}/login", timeout=10)

    assert page.status_code == 200
    assert page.headers.get("Server", "").startswith("Werkzeug")
