"""Everything a run needs, built once per process (web or worker), with no Flask: the
composition root above chat and stream (app/chat/run_services.py names what chat needs)."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx2 as httpx

from app.agents.catalog import AgentCatalog, load_agents
from app.chat.liveness import LivenessMonitor
from app.chat.run_services import Cancellations
from app.config import Settings
from app.db import Database
from app.llm.budget import Calibration
from app.llm.client import ModelClient, make_anthropic
from app.mcp.client import McpClient
from app.mcp.sealing import SecretBox
from app.stream import make_hub
from app.stream.hub import Hub
from app.tools.build import build_registry
from app.tools.registry import ToolRegistry


@dataclass
class Services:
    settings: Settings
    database: Database
    model: ModelClient
    hub: Hub
    tools: ToolRegistry
    agents: AgentCatalog
    cancellations: Cancellations = field(default_factory=Cancellations)
    calibration: Calibration = field(default_factory=Calibration)
    liveness: LivenessMonitor = None  # type: ignore[assignment]
    # MCP servers: the bridge process that calls them, and the key their secrets are sealed
    # with (app/mcp/).
    mcp: McpClient = None  # type: ignore[assignment]
    secrets: SecretBox = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.mcp is None:
            self.mcp = McpClient(self.settings.mcp_timeout_seconds)
        if self.secrets is None:
            self.secrets = SecretBox(self.settings.mcp_secret_key or self.settings.secret_key)
        if self.liveness is None:
            self.liveness = LivenessMonitor(
                self.settings, self.database, self.hub, self.cancellations
            )

    def close(self) -> None:
        self.liveness.stop()
        self.model.close()
        self.mcp.close()
        self.hub.close()
        self.database.dispose()


def model_client(settings: Settings) -> ModelClient:
    if settings.uses_demo_model:
        # The demo model answers through the same SDK code path, over an in-process transport.
        return ModelClient(settings, connect=lambda: _demo_anthropic(settings))
    return ModelClient(settings, connect=lambda: make_anthropic(settings))


def _demo_anthropic(settings: Settings):
    from app.llm.demo import DemoTransport

    return make_anthropic(_demo_settings(settings), httpx.Client(transport=DemoTransport()))


def _demo_settings(settings: Settings) -> Settings:
    demo = {"anthropic_base_url": "http://demo.invalid", "anthropic_api_key": "demo"}
    return settings.model_copy(update=demo)


def make_database(settings: Settings) -> Database:
    if settings.database_url.startswith("sqlite"):
        # Connections are free here; every run thread may hold one while it persists. Kept
        # open, so a busy moment does not reopen them with their PRAGMAs.
        return Database(settings.database_url, pool_size=settings.run_threads + 10, max_overflow=50)
    # A server counts connections (PostgreSQL allows 100 by default) and every web process
    # and worker has a pool: at most DATABASE_POOL_SIZE each; runs wait their turn (they
    # hold a connection only for short transactions, never across a model call).
    size = settings.database_pool_size
    return Database(settings.database_url, pool_size=size, max_overflow=0, pool_timeout=60)


def build_services(
    settings: Settings, database: Database | None = None, hub: Hub | None = None
) -> Services:
    agents = load_agents()
    return Services(
        settings=settings,
        database=database or make_database(settings),
        model=model_client(settings),
        hub=hub or make_hub(settings),
        tools=build_registry(agents),
        agents=agents,
    )
