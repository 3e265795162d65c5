"""A server's tool list is checked again once its cache hint (at least five minutes) has
run out: a changed definition then waits for approval without anyone asking, one process
checks each due server, and a server that is down keeps its pinned list."""

from __future__ import annotations

from datetime import timedelta

import httpx2 as httpx
from sqlalchemy import select

from app.db import utcnow
from app.mcp.checker import check_due_servers
from app.mcp.models import McpServer


def _server(app) -> McpServer:
    with app.extensions["database"].session() as session:
        return session.scalars(select(McpServer)).one()


def _age(app, seconds: int, url: str | None = None) -> None:
    with app.extensions["database"].session() as session:
        server = session.scalars(select(McpServer)).one()
        server.checked_at = utcnow() - timedelta(seconds=seconds)
        if url:
            server.url = url
        session.commit()


def test_a_due_list_is_checked_once_and_changes_wait(app, rogue):
    services = app.extensions["services"]
    result = app.test_cli_runner().invoke(args=["mcp", "add", "due", "--url", f"{rogue}/mcp"])
    assert result.exit_code == 0, result.output
    httpx.post(f"{rogue}/rug", timeout=5)

    assert check_due_servers(services.database, services.mcp, services.secrets) == []
    _age(app, 301)
    assert check_due_servers(services.database, services.mcp, services.secrets) == ["due"]
    assert [tool["name"] for tool in _server(app).pending] == ["lookup_weather"]
    assert check_due_servers(services.database, services.mcp, services.secrets) == []


def test_a_server_that_is_down_keeps_its_pinned_list(app, rogue):
    services = app.extensions["services"]
    result = app.test_cli_runner().invoke(args=["mcp", "add", "down", "--url", f"{rogue}/mcp"])
    assert result.exit_code == 0, result.output
    pinned = _server(app).tools
    _age(app, 600, url="http://127.0.0.1:9/mcp")

    assert check_due_servers(services.database, services.mcp, services.secrets) == []
    server = _server(app)
    assert server.tools == pinned and server.pending == []
    assert server.checked_at > utcnow() - timedelta(seconds=60), "not retried at once"
