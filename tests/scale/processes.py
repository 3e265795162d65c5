"""Real processes for the scale tests: gunicorn web processes, `flask worker` and
`flask serve`, started the way an operator would, on this test's database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx2 as httpx

from tests.live import connect_socket
from tests.ports import free_port
from tests.waiting import eventually, scaled

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def base_env(tmp_path: Path, database_url: str, model_url: str, **settings: str) -> dict:
    """What every process of one deployment shares."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    }
    env.update(
        DATABASE_URL=database_url,
        INSTANCE_PATH=str(tmp_path / "instance"),
        SECRET_KEY="scale-test-secret",
        # No title call after a first exchange: it would take the next scripted reply.
        CHAT_TITLES="false",
        MODEL_PROVIDER="anthropic",
        ANTHROPIC_BASE_URL=model_url,
        ANTHROPIC_API_KEY="test-key",
        RUN_QUEUE=f"test-runs-{uuid.uuid4().hex[:8]}",
        REDIS_PREFIX=f"test-{uuid.uuid4().hex[:8]}:",
        PYTHONUNBUFFERED="1",
    )
    env.update(settings)
    return env


class Process:
    def __init__(self, name: str, argv: list[str], env: dict, log_dir: Path, url: str | None):
        self.name = name
        self.argv = argv
        self.env = env
        self.url = url
        self.log_path = log_dir / f"{name}.log"
        self.popen: subprocess.Popen | None = None

    def start(self) -> Process:
        log = open(self.log_path, "ab")  # noqa: SIM115 (lives as long as the process)
        self.popen = subprocess.Popen(
            self.argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        """A web process answers /login; a worker has said it is consuming."""

        def ready() -> bool:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited at start:\n{self.log()}")
            return self._ready()

        eventually(ready, timeout, lambda: f"{self.name} not ready:\n{self.log()}")

    def _ready(self) -> bool:
        if self.url is None:
            return "worker consuming" in self.log()
        try:
            return httpx.get(f"{self.url}/login", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        """SIGKILL to the whole process group: no cleanup of any kind runs."""
        if self.popen and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            for child in _children(self.popen.pid):
                os.kill(child, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def gunicorn_web(name: str, env: dict, log_dir: Path) -> Process:
    port = free_port()
    env = {**env, "GUNICORN_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "1"}
    argv = [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"]
    return Process(name, argv, env, log_dir, f"http://127.0.0.1:{port}")


def flask_serve(name: str, env: dict, log_dir: Path, port: int | None = None) -> Process:
    port = port or free_port()
    env = {**env, "HOST": "127.0.0.1", "PORT": str(port)}
    argv = [str(BIN / "flask"), "--app", "wsgi", "serve"]
    return Process(name, argv, env, log_dir, f"http://127.0.0.1:{port}")


def flask_worker(name: str, env: dict, log_dir: Path, threads: int = 4) -> Process:
    argv = [str(BIN / "flask"), "--app", "wsgi", "worker", "--threads", str(threads)]
    return Process(name, argv, env, log_dir, None)


class Api:
    """A script's view of one web process: bearer token, JSON in and out."""

    def __init__(self, url: str, token: str):
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"}
        self.http = httpx.Client(base_url=url, headers=self.headers, timeout=10.0)
        self.sockets: list[FrameReader] = []

    def post(self, path: str, body: dict) -> httpx.Response:
        return self.http.post(path, json=body)

    def get(self, path: str) -> dict:
        response = self.http.get(path)
        response.raise_for_status()
        return response.json()

    def rows(self, chat_id: int) -> list[dict]:
        return self.get(f"/api/chats/{chat_id}/messages")["messages"]

    def chat_status(self, chat_id: int) -> str:
        chats = self.get("/api/chats")["chats"]
        return next(c["status"] for c in chats if c["id"] == chat_id)

    def socket(self, chat_id: int) -> FrameReader:
        ws_url = self.url.replace("http://", "ws://") + f"/ws/chats/{chat_id}?format=json"
        reader = FrameReader(connect_socket(ws_url, headers=self.headers))
        self.sockets.append(reader)
        return reader

    def close(self) -> None:
        for reader in self.sockets:
            reader.close()
        self.http.close()


class FrameReader:
    def __init__(self, ws):
        self.ws = ws
        self.frames: list[dict] = []

    def until(self, predicate, timeout: float = 20.0) -> dict:
        """Read frames until one matches; every frame read is kept in `frames`."""
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            message = self.ws.receive(timeout=0.2)
            if message is None:
                continue
            frame = json.loads(message)
            self.frames.append(frame)
            if predicate(frame):
                return frame
        raise TimeoutError(f"no matching frame; got {self.frames}")

    def close(self) -> None:
        if self.ws.connected:
            self.ws.close()
