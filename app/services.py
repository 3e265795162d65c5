"""Everything a run needs, built once per process (web or worker), with no Flask."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import httpx2 as httpx

from app.agents.catalog import AgentCatalog, load_agents
from app.chat.budget import Calibration
from app.config import Settings
from app.db import Database
from app.llm.client import ModelClient, make_anthropic
from app.stream.hub import Hub, LocalHub
from app.tools.build import build_registry
from app.tools.registry import ToolRegistry


class Cancellations:
    """Runs stopped in this process: the loop checks here on every event, and asks the
    database (where a stop from any process lands) only every few seconds."""

    def __init__(self) -> None:
        self._runs: set[int] = set()
        self._lock = threading.Lock()

    def add(self, run_id: int) -> None:
        with self._lock:
            self._runs.add(run_id)

    def __contains__(self, run_id: int) -> bool:
        return run_id in self._runs

    def discard(self, run_id: int) -> None:
        with self._lock:
            self._runs.discard(run_id)


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

    def close(self) -> None:
        self.model.close()
        self.database.dispose()


def model_client(settings: Settings) -> ModelClient:
    http_client = None
    if settings.uses_demo_model:
        from app.llm.demo import DemoTransport

        # The demo model answers through the same SDK code path, over an in-process transport.
        http_client = httpx.Client(transport=DemoTransport())
        return ModelClient(settings, make_anthropic(_demo_settings(settings), http_client))
    return ModelClient(settings, make_anthropic(settings, http_client))


def _demo_settings(settings: Settings) -> Settings:
    from dataclasses import replace

    return replace(settings, anthropic_base_url="http://demo.invalid", anthropic_api_key="demo")


def make_database(settings: Settings) -> Database:
    # Every run thread may hold a connection while it persists; size the pool for them.
    return Database(settings.database_url, pool_size=10, max_overflow=settings.run_threads + 10)


def build_services(
    settings: Settings, database: Database | None = None, hub: Hub | None = None
) -> Services:
    agents = load_agents()
    return Services(
        settings=settings,
        database=database or make_database(settings),
        model=model_client(settings),
        hub=hub or LocalHub(),
        tools=build_registry(agents),
        agents=agents,
    )
