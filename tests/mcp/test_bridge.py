"""The bridge under gevent, as `make run` serves: a stdio server is spawned and answers
several calls at once while the loop keeps running (a greenlet counts throughout; the
SDK's own asyncio, run in a thread there, could not spawn a server at all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import PROJECT_ROOT

SCRIPT = Path(__file__).with_name("gevent_calls.py")


def test_calls_under_gevent_answer_while_the_loop_runs():
    environment = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=90, env=environment
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["ok"] == [True, True, True]
    assert report["ticks"] > 10, "the loop went on while the calls waited"


def test_a_persons_server_may_not_lead_the_bridge_to_an_internal_address(rogue):
    """Its URL, and every address its sign-in metadata names, is checked on each request:
    a name that later resolves inward is refused too, unless the host is allow-listed."""
    from app.mcp.client import McpClient, McpError, Target

    client = McpClient(timeout=10)
    try:
        inward = Target(url=f"{rogue}/mcp", public_only=True)
        with pytest.raises(McpError, match="internal address"):
            client.list_tools(inward)
        allowed = Target(url=f"{rogue}/mcp", public_only=True, allow_hosts=("127.0.0.1",))
        assert client.list_tools(allowed)["tools"]
    finally:
        client.close()
