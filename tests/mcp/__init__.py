"""MCP servers for the tests: a deliberately malicious one of ours (rogue_server.py)."""

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


@contextmanager
def rogue_server() -> Iterator[str]:
    """The rogue server's base URL (its MCP endpoint is `/mcp`), stopped afterwards."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(ROGUE), str(port)])
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{base}/seen", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        eventually(up, 20, "the rogue MCP server to listen")
        yield base
    finally:
        process.kill()
        process.wait()
