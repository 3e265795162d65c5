"""What a run needs from the process it runs in, named here so that chat depends on no
layer above it: app/services.py builds the real thing (the composition root, above chat
and stream) and app/stream's hubs are the publisher."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.agents.catalog import AgentCatalog
    from app.chat.liveness import LivenessMonitor
    from app.config import Settings
    from app.db import Database
    from app.events import Event
    from app.llm.budget import Calibration
    from app.llm.client import ModelClient
    from app.mcp.client import McpClient
    from app.mcp.sealing import SecretBox
    from app.tools.registry import ToolRegistry


class LiveRun(Protocol):
    """What the pages show of a conversation's run in flight."""

    run_id: int | None
    text: str


class Publisher(Protocol):
    """Where a run's events go (every open page of the conversation, or of the person)."""

    def publish(self, conversation_id: int, event: Event) -> None: ...

    def publish_user(self, user_id: int, event: Event) -> None: ...

    def live_state(self, conversation_id: int) -> LiveRun: ...


class Cancellations:
    """Runs stopped while they execute in this process: the loop checks here on every
    event, and asks the database (where a stop from any process lands) only every few
    seconds. Only a run executing here is kept, from its claim to its end: a stop of a
    run answering elsewhere, or a poll that read a run just before it ended, adds nothing,
    so the set never outgrows the runs in flight here."""

    def __init__(self) -> None:
        self._executing: set[int] = set()
        self._runs: set[int] = set()
        self._lock = threading.Lock()

    def executing(self, run_id: int) -> None:
        """The run was claimed here (called before the claim commits, so a stop that
        follows the claim finds it)."""
        with self._lock:
            self._executing.add(run_id)

    def ended(self, run_id: int) -> None:
        """The run no longer executes here: it leaves both sets."""
        with self._lock:
            self._executing.discard(run_id)
            self._runs.discard(run_id)

    def add(self, run_id: int) -> None:
        with self._lock:
            if run_id in self._executing:
                self._runs.add(run_id)

    def __contains__(self, run_id: int) -> bool:
        return run_id in self._runs


class RunServices(Protocol):
    """Everything a run reaches: app.services.Services is one."""

    settings: Settings
    database: Database
    model: ModelClient
    mcp: McpClient
    secrets: SecretBox
    tools: ToolRegistry
    agents: AgentCatalog
    cancellations: Cancellations
    calibration: Calibration
    liveness: LivenessMonitor

    @property
    def hub(self) -> Publisher: ...

    def close(self) -> None: ...
