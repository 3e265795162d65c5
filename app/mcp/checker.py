"""Servers' tool lists checked again once their cache hint runs out: a definition that
changed waits for approval (app/mcp/servers.py), so a change is seen without anyone
asking. One thread per process, like the stale sweeper; each due server is claimed with a
compare-and-set on its `checked_at`, so one process checks it, and a round checks a
bounded number of servers, each bounded by the client's timeout."""

from __future__ import annotations

import logging
import random
import threading
from datetime import datetime, timedelta

from sqlalchemy import select, update

from app.db import Database, rows_changed, utcnow
from app.mcp.client import McpClient
from app.mcp.models import McpServer
from app.mcp.sealing import SecretBox
from app.mcp.servers import ServerRefused, check_server

log = logging.getLogger(__name__)

MIN_SECONDS = 300  # between two checks of one server, whatever its hint says
MAX_PER_ROUND = 5
ROUND_SECONDS = 60.0


def check_due_servers(
    database: Database,
    client: McpClient,
    box: SecretBox,
    allow_hosts: tuple[str, ...] = (),
) -> list[str]:
    """Check the servers whose list is due; the names of those checked. A server that asks
    for a sign-in is checked with its keeper's (app/mcp/targets.py), or not at all."""
    checked = []
    for server_id in _claim_due(database, utcnow()):
        with database.session() as session:
            server = session.get(McpServer, server_id)
            if server is None:
                continue
            name = server.name
            try:
                check_server(session, client, box, server, allow_hosts)
                session.commit()
            except ServerRefused as refused:
                session.rollback()  # a server that is down keeps its pinned list
                log.warning("MCP server %s was not checked: %s", name, refused)
                continue
        checked.append(name)
    return checked


def _claim_due(database: Database, now: datetime) -> list[int]:
    claimed: list[int] = []
    with database.session() as session:
        rows = session.execute(
            select(McpServer.id, McpServer.checked_at, McpServer.list_ttl_seconds)
        ).all()
        for server_id, checked_at, ttl in rows:
            if len(claimed) == MAX_PER_ROUND:
                break
            if checked_at + timedelta(seconds=max(ttl, MIN_SECONDS)) > now:
                continue
            won = session.execute(
                update(McpServer)
                .where(McpServer.id == server_id, McpServer.checked_at == checked_at)
                .values(checked_at=now)
            )
            if rows_changed(won):
                claimed.append(server_id)
        session.commit()
    return claimed


class McpListChecker:
    """The periodic check, jittered so processes do not check in lockstep."""

    def __init__(
        self,
        database: Database,
        client: McpClient,
        box: SecretBox,
        allow_hosts: tuple[str, ...] = (),
    ) -> None:
        self.database, self.client, self.box = database, client, box
        self.allow_hosts = allow_hosts
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mcp-lists", daemon=True)

    def start(self) -> McpListChecker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(ROUND_SECONDS * random.uniform(0.8, 1.2)):
            try:
                check_due_servers(self.database, self.client, self.box, self.allow_hosts)
            except Exception:
                log.exception("MCP server lists were not checked")
