"""What a tool handler is given: the person, the conversation and the services."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from sqlalchemy.orm import Session

from app.accounts.projects import membership, personal_project_id
from app.agents.outputs import Writer
from app.config import Settings
from app.llm.client import ModelClient
from app.mcp.client import McpClient
from app.mcp.sealing import SecretBox
from app.tools.results import ToolFailure

if TYPE_CHECKING:
    from app.events import Event

T = TypeVar("T")


class ToolServices(Protocol):
    """What a tool uses of the process's services (`app.services.Services` has them)."""

    settings: Settings
    model: ModelClient
    mcp: McpClient
    secrets: SecretBox


@dataclass
class ToolContext:
    session: Session
    user_id: int
    conversation_id: int
    run_id: int
    services: ToolServices
    emit: Callable[[Event], None]
    tool_use_id: str = ""
    # Whether the run was stopped (or its chat deleted): a tool's own model stream checks
    # it as it reads, so Stop cuts an agent mid-write.
    should_stop: Callable[[], bool] | None = None
    # The untrusted content the conversation's model has been sent (empty: none). While
    # there is any, what a tool creates records these sources (app/chat/provenance.py).
    untrusted_sources: list[dict[str, Any]] = field(default_factory=list)
    # Untrusted content this call read from the workspace (an output made from a web page):
    # it joins the result's sources, so the reading conversation is tainted too.
    read_untrusted: list[dict[str, Any]] = field(default_factory=list)
    # Switches this conversation's tool phase; the chat hands it in (the phase lives on
    # the conversation, which tools do not know). None: no phase to switch (a card check).
    switch_phase: Callable[[str], None] | None = None
    # The chat's project, whose workspace the tools read and write (the chat hands it
    # in); None: the person's personal project (a check outside a chat, a test).
    chat_project_id: int | None = None

    @cached_property
    def project_id(self) -> int:
        if self.chat_project_id is not None:
            return self.chat_project_id
        return personal_project_id(self.session, self.user_id)

    @cached_property
    def role(self) -> str | None:
        """The person's role in the chat's project, read once per call (None: no longer
        a member: app.tools.invoke refuses every tool then)."""
        return membership(self.session, self.user_id, self.project_id)

    @property
    def tainted(self) -> bool:
        return bool(self.untrusted_sources)

    def saw(self, obj: Any, kind: str = "") -> Any:
        """Note that this call read `obj` (a model instance, or a selected row with its
        `untrusted_sources` and a `kind`); returns it. An object made from untrusted
        content is itself untrusted content for whoever reads it."""
        sources = getattr(obj, "untrusted_sources", None)
        if sources:
            kind = kind or type(obj).__tablename__.removesuffix("s")
            entry = {"saved": kind, "id": getattr(obj, "id", None)}
            if entry not in self.read_untrusted:
                self.read_untrusted.append(entry)
        return obj

    @property
    def settings(self) -> Settings:
        return self.services.settings

    def writer(self) -> Writer:
        """Where a model this call asks writes: this run's timeline, cut by Stop."""
        return Writer(
            model=self.services.model,
            run_id=self.run_id,
            emit=self.emit,
            end_reads=self.end_reads,
            should_stop=self.should_stop,
        )

    def end_reads(self) -> None:
        """End the transaction before slow work (a model call, an outbound request): on
        SQLite even a read holds the database's write lock, elsewhere a connection. Call
        it after the tool's reads and before its first write; the writes then go in a new
        transaction, committed with the tool's result."""
        if self.session.new or self.session.dirty or self.session.deleted:
            raise RuntimeError("end_reads() after a write would commit it before the slow work")
        self.session.commit()

    def _in_reach(self, obj: Any) -> bool:
        """A workspace item in the chat's project; the person's own (an attachment)."""
        if hasattr(obj, "project_id"):
            return bool(obj.project_id == self.project_id)
        return bool(getattr(obj, "user_id", None) == self.user_id)

    def owned(self, model: type[T], object_id: Any, label: str) -> T:
        """The object with that id in the chat's project, or a not-found failure (never
        another project's, the same answer as an id that does not exist)."""
        if isinstance(object_id, bool) or not isinstance(object_id, int):
            raise ToolFailure(f"{label} id must be a whole number.")
        obj = self.session.get(model, object_id)
        if obj is None or not self._in_reach(obj):
            raise ToolFailure(f"No {label} with id {object_id} was found.")
        return obj
