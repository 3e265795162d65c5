"""The process's way to MCP servers: one bridge process (app/mcp/bridge.py) started on first
use, spoken to in JSON lines. Callers block only themselves: under gevent the pipe is
gevent's and the wait a greenlet's; elsewhere a thread waits on an event. Every call is
bounded (its timeout plus a grace for the bridge itself), so a server that is down or slow
costs one timeout, never a stalled run; a bridge that dies fails its calls and the next
call starts another."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BRIDGE = Path(__file__).with_name("bridge.py")
GRACE_SECONDS = 5.0  # the bridge's own start and answer, beyond the server's timeout
# What the bridge's environment keeps of ours: nothing secret (no SECRET_KEY, model key,
# database or Redis address), only what a program needs to start.
KEPT_VARIABLES = ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME", "TZ")


class McpError(Exception):
    """A server could not be reached or did not answer as MCP; the message says so plainly.
    `grant`: the person's tokens, when the SDK refreshed them before the failure (keep
    them: an old refresh token may no longer work)."""

    def __init__(self, message: str, grant: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.grant = grant


class SignInRequired(McpError):
    """The server wants the person to sign in (again) before it answers."""


@dataclass(frozen=True)
class Target:
    """Where a server is: a URL with its headers, or a command (admins only). The headers
    are secrets: never logged, never shown, never part of an error."""

    url: str | None = None
    command: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    # A person's sign-in (app/mcp/sign_in.py): their tokens, our registration, where the
    # authorization server sends them back. Only ever one person's, for that person's call.
    grant: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    # A person's own server: no request may go to an internal address but these hosts.
    public_only: bool = False
    allow_hosts: tuple[str, ...] = ()

    def wire(self) -> dict[str, Any]:
        if self.command:
            return {"command": list(self.command)}
        wired: dict[str, Any] = {"url": self.url, "headers": dict(self.headers)}
        if self.grant is not None:
            wired["grant"] = self.grant
        if self.public_only:
            wired.update(public_only=True, allow_hosts=list(self.allow_hosts))
        return wired


class _Waiter:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.answer: dict[str, Any] | None = None


class McpClient:
    """list_tools and call_tool against any server, through the bridge."""

    def __init__(self, timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._waiters: dict[int, _Waiter] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def list_tools(self, target: Target, timeout: float | None = None) -> dict[str, Any]:
        return self._ask({"op": "list_tools", "target": target.wire()}, timeout)

    def call_tool(
        self,
        target: Target,
        name: str,
        arguments: dict[str, Any],
        timeout: float | None = None,
        *,
        answers: dict[str, Any] | None = None,
        request_state: str | None = None,
    ) -> dict[str, Any]:
        """The tool's result: {content, structured, is_error}, or {input_required:
        {questions: {key: {message, schema}}, request_state}} when the server asks the
        person something first; call again with `answers` ({key: {action, content}}) and
        its `request_state`."""
        request: dict[str, Any] = {"op": "call_tool", "target": target.wire(), "name": name}
        if answers is not None:
            request.update(answers=answers, request_state=request_state)
        return self._ask({**request, "arguments": arguments}, timeout)

    def start_sign_in(self, target: Target) -> dict[str, Any]:
        """Discovery and registration, up to where the person is sent: {authorization_url,
        state, verifier, client_info, oauth_metadata, resource, scope}, all to be sealed."""
        return self._ask({"op": "sign_in_start", "target": target.wire()}, None)

    def finish_sign_in(
        self, target: Target, started: dict[str, Any], code: str, issuer: str | None
    ) -> dict[str, Any]:
        """The code exchanged: the grant {tokens, expires_at, client_info, scope}."""
        request = {"op": "sign_in_finish", "target": target.wire(), "started": started}
        return self._ask({**request, "code": code, "iss": issuer}, None)

    def _ask(self, request: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        seconds = timeout or self.timeout
        waiter = _Waiter()
        with self._lock:
            ident = next(self._ids)
            self._waiters[ident] = waiter
            try:
                process = self._running()
                assert process.stdin is not None
                line = json.dumps({**request, "id": ident, "timeout": seconds})
                process.stdin.write(line + "\n")
                process.stdin.flush()
            except OSError as exc:
                self._waiters.pop(ident, None)
                self._stopped()
                raise McpError("The MCP bridge could not be started.") from exc
        if not waiter.done.wait(seconds + GRACE_SECONDS):
            with self._lock:
                self._waiters.pop(ident, None)
            raise McpError("The server did not answer in time.")
        answer = waiter.answer or {"ok": False, "error": "The MCP bridge stopped."}
        grant = answer.get("grant") if isinstance(answer.get("grant"), dict) else None
        if not answer.get("ok"):
            failure = SignInRequired if answer.get("sign_in") else McpError
            raise failure(str(answer.get("error") or "The server failed."), grant)
        result = answer.get("result")
        if not isinstance(result, dict):
            raise McpError("The server's answer could not be read.", grant)
        return {**result, "grant": grant} if grant else result

    def _running(self) -> subprocess.Popen[str]:
        """The bridge, started if need be (called under the lock)."""
        if self._process is not None and self._process.poll() is None:
            return self._process
        environment = {name: os.environ[name] for name in KEPT_VARIABLES if name in os.environ}
        programs = str(Path(sys.executable).parent)  # the venv's own servers first
        environment["PATH"] = os.pathsep.join([programs, os.environ.get("PATH", "")])
        process = subprocess.Popen(
            [sys.executable, "-I", str(BRIDGE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=environment,
        )
        self._process = process
        self._reader = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._reader.start()
        return process

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                waiter = self._waiters.pop(answer.get("id"), None)
            if waiter is not None:
                waiter.answer = answer
                waiter.done.set()
        with self._lock:
            if self._process is process:
                self._stopped()

    def _stopped(self) -> None:
        """The bridge ended: every call waiting on it fails now (called under the lock)."""
        self._process = None
        for waiter in self._waiters.values():
            waiter.done.set()
        self._waiters.clear()

    def close(self) -> None:
        """End the bridge: its stdin closed, it stops; it is killed if it lingers."""
        with self._lock:
            process, self._process = self._process, None
            reader, self._reader = self._reader, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.close()
            process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
        if reader is not None:
            reader.join(timeout=5)
        process.stdout.close()
