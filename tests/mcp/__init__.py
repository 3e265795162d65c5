"""MCP servers for the tests: a deliberately malicious one of ours (rogue_server.py) and one
that asks each person to sign in (gatekeeper_server.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2 as httpx

from tests.ports import free_port
from tests.waiting import eventually

ROGUE = Path(__file__).with_name("rogue_server.py")
TIME_COMMAND = "mcp-server-time --local-timezone UTC"


GATEKEEPER = Path(__file__).with_name("gatekeeper_server.py")


@contextmanager
def rogue_server() -> Iterator[str]:
    """The rogue server's base URL (its MCP endpoint is `/mcp`), stopped afterwards."""
    with _serving(ROGUE, "/seen") as base:
        yield base


@contextmanager
def gatekeeper_server() -> Iterator[str]:
    """The sign-in server's base URL (its MCP endpoint is `/mcp`), stopped afterwards."""
    with _serving(GATEKEEPER, "/log") as base:
        yield base


@contextmanager
def _serving(script: Path, probe: str) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(script), str(port)])
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{base}{probe}", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        eventually(up, 20, f"the MCP server {script.name} to listen")
        yield base
    finally:
        process.kill()
        process.wait()
