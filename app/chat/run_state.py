"""What a run is and what it has done so far, shared by the loop (app/chat/loop.py), its
tool calls (app/chat/tool_calls.py) and its end (app/chat/run_end.py), each handed these
explicitly: the run's identity, its state, the frames it sends and its guard (whether it
may go on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Table, bindparam, update
from sqlalchemy.orm import Session

from app import events as ev
from app.chat.liveness import StreamWatch
from app.chat.model_choice import ChosenModel
from app.chat.models import Conversation, RunStatus
from app.chat.run_log import RunLog
from app.chat.run_services import Cancellations, Publisher
from app.chat.runs import run_status
from app.chat.steps import RunSteps
from app.db import utcnow
from app.llm.errors import StreamAborted
from app.llm.web_search import search_sources
from app.tools.context import ToolContext
from app.tools.registry import Tool
from app.tools.results import ToolResult

_conversations = cast(Table, Conversation.__table__)  # typed as any FromClause by SQLAlchemy
_TOUCH_CONVERSATION = (
    update(_conversations)
    .where(_conversations.c.id == bindparam("conversation_id"))
    .values(updated_at=bindparam("now"))
)


class RunCancelled(Exception):
    """The run was stopped, reclaimed or deleted: it writes nothing more."""


@dataclass(frozen=True)
class RunIds:
    """Who and where the run is, as its claim read them."""

    run_id: int
    conversation_id: int
    user_id: int
    # The run's turn, when its claim read it (metering needs it; else it reads the row).
    turn_index: int | None = None
    # The chat's project, read with the claim: the workspace its tools read and write.
    project_id: int | None = None


@dataclass
class RunState:
    """What the run has done so far: what it sent and logged, its taint, its counts."""

    ids: RunIds
    log: RunLog
    # The tool calls, kept as the run's "N steps" summary when it ends (app/chat/steps.py).
    steps: RunSteps
    # The untrusted content the model has been sent (app/chat/taint.py): while there is
    # any, writes and fetches of addresses the person did not type are held.
    sources: list[dict[str, Any]] = field(default_factory=list)
    typed_urls: set[str] = field(default_factory=set)
    # A branched conversation (app/chat/branches.py): rows pushed during the run carry no
    # siblings, so clients re-render the shown branch once it ends.
    branched: bool = False
    iterations: int = 0
    # Metered after the run: model calls that answered, and calls of billable tools that
    # actually ran without error. A run the model never answered costs nothing.
    model_answers: int = 0
    billable_calls: int = 0
    # The model its last request was drafted for (the chat's: app/chat/model_choice.py).
    model: ChosenModel | None = None

    @property
    def tainted(self) -> bool:
        return bool(self.sources)

    def read_searches(self, blocks: list[dict[str, Any]]) -> None:
        """The provider's web searches of a model turn: outside content from now on, and
        billed as a tool call each."""
        searched = search_sources(blocks)
        self.billable_calls += len(searched)
        for source in searched:
            if source not in self.sources:
                self.sources.append(source)

    def read_untrusted(
        self, tool: Tool | None, result: ToolResult, context: ToolContext | None = None
    ) -> list[dict[str, Any]]:
        """The untrusted content a result carries; the conversation is tainted from now."""
        found = list(result.untrusted_sources)
        # Our own failure text carries nothing from outside (an outside server's error
        # does: it comes with its sources).
        if not result.is_error:
            found += list(context.read_untrusted if context else [])
            if tool is not None and tool.untrusted and not found:
                found = [{"tool": tool.name}]
        for source in found:
            if source not in self.sources:
                self.sources.append(source)
        return found


class RunFrames:
    """The frames the run sends to the conversation's pages, each counted in its log."""

    def __init__(self, hub: Publisher, state: RunState):
        self.hub = hub
        self.state = state

    def emit(self, event: ev.Event) -> None:
        self.state.log.frame(event.kind)
        if isinstance(event, ev.RowPersisted):
            self.state.steps.row_shown(event.row)
        self.hub.publish(self.state.ids.conversation_id, event)

    def count(self, *kinds: str) -> None:
        """Count frames that are published after the commit about to write the log."""
        for kind in kinds:
            self.state.log.frame(kind)

    def publish(self, event: ev.Event) -> None:
        """A frame counted beforehand (`count`)."""
        self.hub.publish(self.state.ids.conversation_id, event)


class RunGuard:
    """Whether the run may go on: not stopped (here or from another process), its model
    stream not aborted, and still running in the database when it writes."""

    def __init__(self, run_id: int, cancellations: Cancellations):
        self.run_id = run_id
        self.cancellations = cancellations
        # The model stream's watch (app/chat/liveness.py), from when the run executes.
        self.watch: StreamWatch | None = None

    def watch_stream(self, watch: StreamWatch) -> None:
        self.watch = watch

    def is_cancelled(self) -> bool:
        """Stopped here (at once) or from another process (seen within a few seconds)."""
        # A stop from another process lands in the database; this process's liveness
        # monitor polls it for every run here at once and fills `cancellations`.
        return self.run_id in self.cancellations

    def check(self) -> None:
        if self.is_cancelled():
            raise RunCancelled()
        if self.watch is not None and self.watch.aborted:
            raise StreamAborted(self.watch.aborted)

    def ensure_running(self, session: Session) -> None:
        """Last step before a write of the run commits (its conversation is locked by
        then): a run stopped, reclaimed or deleted meanwhile writes nothing more. Stop kept
        what the person saw in the transaction that cancelled the run (app.chat.stop)."""
        if run_status(session, self.run_id) != RunStatus.RUNNING:
            session.rollback()
            raise RunCancelled()


def touch_conversation(session: Session, conversation_id: int) -> None:
    session.execute(_TOUCH_CONVERSATION, {"conversation_id": conversation_id, "now": utcnow()})
