"""`make run`: one process migrates, seeds the demo and serves; with gevent importable
it serves with gunicorn (one gevent worker, as in production), and a run on the
in-process thread executor answers under it."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
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


def test_make_run_serves_the_login_page_with_gunicorn_and_answers_the_demo(make_run):
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


@pytest.mark.parametrize("make_run", [{"MAKE_RUN_SERVER": "flask"}], indirect=True)
def test_make_run_serves_with_flasks_threaded_server_when_set(make_run):
    page = requests.get(f"{make_run}/login", timeout=10)

    assert page.status_code == 200
    assert page.headers.get("Server", "").startswith("Werkzeug")
