"""The host loop: call the model, persist its turn, run its tools, persist their results,
repeat until it answers in text, pauses on a card, or reaches the iteration cap.

State lives in the database: every model call rebuilds the history from rows, so any
process can run any step of any conversation. The loop emits events and renders nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.orm import Session

from app import events as ev
from app.chat import run_end as ending
from app.chat.context_window import Draft, HostRequestBuilder, PreparedRequest
from app.chat.conversations import row_dict
from app.chat.fitting import TurnTooLarge
from app.chat.models import Conversation, Message, Run, RunStatus
from app.chat.presets import tool_groups_of
from app.chat.rows import insert_message
from app.chat.run_end import Abandoned, Ending, Finished, assistant_row
from app.chat.run_log import RunLog
from app.chat.run_services import RunServices
from app.chat.run_state import (
    RunCancelled,
    RunFrames,
    RunGuard,
    RunIds,
    RunState,
    touch_conversation,
)
from app.chat.runs import approval_pending, claim_run
from app.chat.steps import RunSteps
from app.chat.taint import conversation_taint
from app.chat.titles import propose_title
from app.chat.tool_calls import Settled, ToolCalls
from app.chat.toolset import run_tools
from app.db import utcnow
from app.kinds import RowKind
from app.llm.client import AssistantTurn, StreamCallbacks
from app.llm.errors import (
    ContextTooLong,
    ModelError,
    StreamAborted,
    StreamCancelled,
    error_detail,
    plain_reason,
    redact,
)
from app.memory.models import UserMemory
from app.memory.store import memory_parts
from app.telemetry import metrics, tracing
from app.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

# The loop's per-step update, built once (composing it was most of its cost). A Core
# statement on the table, so the ORM does not look for the row among loaded objects: it
# runs in a session of its own, closed after its commit, that never loaded the row.
_runs = cast(Table, Run.__table__)  # typed as any FromClause by SQLAlchemy
_RECORD_ITERATION = (
    update(_runs)
    .where(_runs.c.id == bindparam("run_id"))
    .values(iterations=bindparam("iterations"), heartbeat_at=bindparam("now"))
)


# The tool choice of every step but the wrap-up at the iteration cap.
AUTO = {"type": "auto"}
NO_TOOLS = {"type": "none"}


def execute_run(
    services: RunServices, run_id: int, drain: Callable[[RunIds], None] | None = None
) -> str | None:
    """Claim the run and drive it to a final status. A run already claimed or finished
    (a duplicate delivery) is left alone and None is returned. `drain`: called once the
    run completed with messages in its chat's queue (app/chat/queue_drain.py)."""
    with services.database.session() as session:
        claimed = claim_run(session, run_id)
        if claimed is None:
            # Stopped, or deleted with its conversation, before it began: nothing to cancel.
            return None
        # Before the claim commits: a Stop that follows it finds the run executing here.
        services.cancellations.executing(run_id)
        # The whole row, held by the session: the run's state reads it from there (load_state).
        conversation = session.execute(
            select(Conversation).where(Conversation.id == claimed.conversation_id)
        ).scalar_one()
        ids = RunIds(
            run_id,
            claimed.conversation_id,
            claimed.user_id,
            claimed.turn_index,
            conversation.project_id,
        )
        tracing.current().set("gen_ai.conversation.id", str(claimed.conversation_id))  # the run's
        groups = tool_groups_of(session, conversation.preset_id)  # the chat's preset's, else all
        host = HostLoop(services, ids, run_tools(session, services, claimed.user_id, groups))
        opening: Opening | None
        try:
            opening = host.start(session)
        except Exception:
            # Its first request could not be read: claimed without it, the loop reads it
            # again, and a second failure ends the run with an error the person sees.
            log.warning("run %s: its first request was not read with its claim", run_id)
            session.rollback()
            if claim_run(session, run_id) is None:
                services.cancellations.ended(run_id)
                return None
            host, opening = HostLoop(services, ids), None
        session.commit()
    status = host.run(opening)
    if drain is not None and host.queue_waits:
        drain(ids)
    return status


@dataclass(frozen=True)
class Opening:
    """What the run read before its first model call: whether an approved call waits to
    run first, and, when none does, the first model call's history and prompt (read in
    the transaction that claimed the run)."""

    approval_pending: bool
    draft: Draft | None = None


class HostLoop:
    """One run of the host model: its identity and state, the frames it sends, its guard,
    its tool calls (app/chat/tool_calls.py) and its end (app/chat/run_end.py)."""

    def __init__(self, services: RunServices, ids: RunIds, registry: ToolRegistry | None = None):
        self.services = services
        # The run's tools: the process's own and the person's MCP servers' (chat/toolset.py).
        self.registry = registry or services.tools
        self.settings = services.settings
        self.ids = ids
        log_ = RunLog(services.database, services.settings, ids.run_id, ids.conversation_id)
        self.state = RunState(ids, log_, RunSteps(ids.run_id, self.registry))
        self.frames = RunFrames(services.hub, self.state)
        self.guard = RunGuard(ids.run_id, services.cancellations)
        self.tools = ToolCalls(services, self.state, self.frames, self.guard, self.registry)
        # Completed with messages queued in its chat: the next one is sent (its caller).
        self.queue_waits = False

    def start(self, session: Session) -> Opening:
        """Everything before the first model call, in the transaction that claims the run:
        its state, the first request's history and prompt, and the first iteration's
        count (every transaction saved is CPU and latency before the first token). A run
        that first carries out an approved call drafts its request after that call."""
        # Held while the draft reads them too: a session finds again only what is held.
        conversation, memory, pending = self.load_state(session)
        if pending or self.settings.max_iterations <= 0:
            return Opening(pending)
        draft = self.request_builder().draft(session, AUTO, False, memory_parts(memory))
        self.count_iteration(session)
        return Opening(pending, draft)

    def load_state(self, session: Session) -> tuple[Conversation, UserMemory | None, bool]:
        """What the run needs to know before its first model call, kept in its state; the
        conversation and the person's memory it read, and whether an approval is pending."""
        conversation_id = self.ids.conversation_id
        conversation = session.get(Conversation, conversation_id)
        if conversation is None:
            raise RunCancelled()  # deleted with its run, which the claim just found
        memory = session.get(UserMemory, self.ids.user_id)
        pending = approval_pending(session, conversation_id)
        state = self.state
        state.sources, state.typed_urls = conversation_taint(
            session, conversation_id, self.services.tools, memory
        )
        state.branched = conversation.branch_chosen_at_sequence is not None
        return conversation, memory, pending

    def read_opening(self) -> Opening:
        """The opening, read in its own transaction (it was not read with the claim)."""
        with self.services.database.session() as session:
            return Opening(self.load_state(session)[2])

    # -- the loop ---------------------------------------------------------------------

    def run(self, opening: Opening | None = None) -> str:
        """Drive the run to its end; `opening`: what was read with its claim (None: it
        reads that itself)."""
        services, ids, state = self.services, self.ids, self.state
        started = time.monotonic()
        self.guard.watch_stream(services.liveness.watch(ids.run_id, ids.conversation_id))
        end = self._outcome(opening)
        metrics.run_ended(end.status, time.monotonic() - started)
        if isinstance(end, Finished):
            listed, steps_row = end.listed, end.steps_row
            self.queue_waits = end.queued and end.status == RunStatus.COMPLETED
        else:
            # Failed, cancelled or ended elsewhere: metered and read on their own.
            if state.model_answers:
                ending.meter(services, state)
            listed, steps_row = ending.conversation_changed(services, ids), None
        services.cancellations.ended(ids.run_id)
        ending.keep_steps(services, state, self.frames, steps_row)
        # Released before Done is published: no keepalive of this run can follow its Done.
        services.liveness.release(ids.run_id)
        done = ev.Done(ids.run_id, end.status)
        if isinstance(end, Finished):
            self.frames.publish(done)  # counted in the log its end wrote
        else:
            self.frames.emit(done)
        state.log.flush()
        if listed is not None:
            services.hub.publish_user(ids.user_id, listed)
        if end.status in (RunStatus.COMPLETED, RunStatus.AWAITING):
            # After the chat's first exchange the fast model names it (app/chat/titles.py);
            # the run has ended and no transaction is open.
            propose_title(services, ids.conversation_id, ids.user_id)
        if state.branched:
            ending.restore_unanswered_fork(services, ids)
            services.hub.publish(ids.conversation_id, ev.BranchChanged())
        return end.status

    def _outcome(self, opening: Opening | None) -> Ending:
        """How the run ended: finished by itself, or abandoned (failed, stopped, or ended
        elsewhere)."""
        services, state, frames = self.services, self.state, self.frames
        try:
            return self._loop(opening or self.read_opening())
        except (RunCancelled, StreamCancelled):
            return Abandoned(RunStatus.CANCELLED)
        except StreamAborted as aborted:
            return ending.fail(
                services, state, frames, aborted.reason, _aborted_text(aborted.reason)
            )
        except TurnTooLarge as too_large:
            # Nothing was sent: the step alone outgrows the window even shortened.
            return ending.fail(services, state, frames, too_large.code, too_large.text)
        except ModelError as error:
            secret = self.settings.anthropic_api_key
            log.warning(
                "run %s: model error %s", self.ids.run_id, redact(error_detail(error), [secret])
            )
            state.log.model_error(error)  # the full reason; the person gets the short one
            return ending.fail(
                services, state, frames, error.code, _model_error_text(error, secret)
            )
        except Exception:
            if ending.deleted(services, self.ids.run_id):
                # Its conversation was deleted under it (a write of the run found it gone):
                # a cancellation, not a failure.
                return Abandoned(RunStatus.CANCELLED)
            log.exception("run %s failed", self.ids.run_id)
            state.log.exception()
            message = "Something went wrong while answering. Please try again."
            return ending.fail(services, state, frames, "internal", message)

    def _loop(self, opening: Opening) -> Ending:
        services, state, frames = self.services, self.state, self.frames
        settled = self.tools.settle_approved_call() if opening.approval_pending else Settled.NOTHING
        if settled is Settled.ASKED:
            return ending.finish(services, state, frames, RunStatus.AWAITING)
        presenting = settled is Settled.RAN
        draft = opening.draft
        for _ in range(self.settings.max_iterations):
            turn = self.model_step(AUTO, presenting, draft)
            state.read_searches(turn.content)
            draft = None
            if not turn.tool_uses:
                return ending.answer(services, state, frames, turn, presenting)
            row = self.persist_assistant_turn(turn)
            if self.tools.run_tools(turn, row):
                self.close_presenting(presenting)
                return ending.finish(services, state, frames, RunStatus.AWAITING)
            presenting = True
        # The cap: one last call that may not use tools, so the person always gets a sentence.
        turn = self.model_step(NO_TOOLS, presenting, wrap_up=True)
        return ending.answer(services, state, frames, _without_tool_uses(turn), presenting)

    # -- one model call -----------------------------------------------------------------

    def model_step(
        self,
        tool_choice: dict[str, str],
        presenting: bool,
        draft: Draft | None = None,
        wrap_up: bool = False,
    ) -> AssistantTurn:
        """One model call; `draft`: its history and prompt, when they were read already."""
        self.guard.check()
        run_id = self.ids.run_id
        if presenting:
            # Before the step's transaction, which writes the log with this frame counted.
            self.frames.emit(ev.Timeline(run_id, "presenting", "started"))
        draft = draft or self.draft(tool_choice, wrap_up)
        self.state.model = draft.model  # metered on the model its requests name
        prepared = self.prepare(tool_choice, wrap_up, draft=draft)
        # The working indicator says "retrying" while the SDK retries this call (its
        # "thinking" went out with the message: app.web.chat_actions.start_turn).
        since = int(time.time() * 1000)
        watch = self.guard.watch
        callbacks = StreamCallbacks(
            on_text=self.stream_text,
            on_thinking_start=watch.reasoning_started if watch else None,
            on_thinking_end=watch.reasoning_ended if watch else None,
            should_stop=self.guard.is_cancelled,
            on_retry=lambda reason: self.frames.emit(ev.Status(run_id, "retrying", since, reason)),
            watch=watch,
        )
        try:
            turn = self.call_model(prepared, callbacks)
        except ContextTooLong:
            # Our estimate was off: compact harder once and try again; a second refusal
            # ends the run with a clear error.
            prepared = self.prepare(tool_choice, wrap_up, harder=True)
            turn = self.call_model(prepared, callbacks)
        self.state.model_answers += 1
        self.services.calibration.record(
            self.ids.conversation_id, prepared.estimated_input, turn.usage.get("input_tokens", 0)
        )
        return turn

    def stream_text(self, text: str) -> None:
        """A text delta; none once the run is stopped (Stop kept what had been shown)."""
        if not self.guard.is_cancelled():
            self.frames.emit(ev.TextDelta(self.ids.run_id, text))

    def call_model(self, prepared: PreparedRequest, callbacks: StreamCallbacks) -> AssistantTurn:
        """One streamed model call, recorded in the run log (a failed one too)."""
        with self.state.log.model_call(prepared.request, prepared.estimated_input) as call:
            turn = call.turn = self.services.model.stream_turn(prepared.request, callbacks)
        return turn

    def request_builder(self) -> HostRequestBuilder:
        return HostRequestBuilder(
            self.services, self.ids.conversation_id, self.services.calibration, self.registry
        )

    def draft(self, tool_choice: dict[str, str], wrap_up: bool) -> Draft:
        """The step's history and prompt, read in one transaction with its iteration's
        count (the first step's were read in the transaction that claimed the run)."""
        with self.services.database.session() as session:
            draft = self.request_builder().draft(session, tool_choice, wrap_up)
            self.count_iteration(session)
            session.commit()
        return draft

    def prepare(
        self,
        tool_choice: dict[str, str],
        wrap_up: bool,
        harder: bool = False,
        draft: Draft | None = None,
    ) -> PreparedRequest:
        prepared = self.request_builder().prepare(tool_choice, wrap_up, harder, draft)
        for notice in prepared.notices:
            self.frames.emit(ev.RowPersisted(row_dict(notice), self.ids.run_id))
        return prepared

    def build_request(self, tool_choice: dict[str, str], wrap_up: bool) -> dict[str, Any]:
        """The request the next model call would send (history rebuilt from rows)."""
        return self.prepare(tool_choice, wrap_up).request

    # -- persisting ---------------------------------------------------------------------

    def persist_assistant_turn(self, turn: AssistantTurn) -> Message:
        """A turn that calls tools: its row, before the tools run."""
        text, meta = assistant_row(turn)
        conversation_id = self.ids.conversation_id
        with self.services.database.session() as session:
            row = insert_message(
                session,
                conversation_id,
                role="assistant",
                kind=RowKind.HOST,
                content=text,
                meta=meta,
            )
            touch_conversation(session, conversation_id)
            self.guard.ensure_running(session)
            self.state.log.write(session)
            session.commit()
        if text:
            self.frames.emit(ev.HostTurn(self.ids.run_id, text))
        if not row.hidden:
            self.frames.emit(ev.RowPersisted(row_dict(row), self.ids.run_id))
        return row

    # -- bookkeeping ----------------------------------------------------------------------

    def close_presenting(self, presenting: bool) -> None:
        if presenting:
            self.frames.emit(ev.Timeline(self.ids.run_id, "presenting", "done"))

    def count_iteration(self, session: Session) -> None:
        """One more model call, counted with the log of the steps so far in the caller's
        transaction (before the call, so a run that dies in it keeps them)."""
        self.state.iterations += 1
        session.execute(
            _RECORD_ITERATION,
            {"run_id": self.ids.run_id, "iterations": self.state.iterations, "now": utcnow()},
        )
        self.state.log.write(session)


def _without_tool_uses(turn: AssistantTurn) -> AssistantTurn:
    content = [b for b in turn.content if b["type"] != "tool_use"]
    return AssistantTurn(content=content, stop_reason=turn.stop_reason, usage=turn.usage)


def _aborted_text(reason: str) -> str:
    if reason == "max_run":
        return "This reply took too long and was stopped. Ask again, perhaps in smaller steps."
    return "The model stopped responding in the middle of its answer. Please try again."


def _model_error_text(error: ModelError, *secrets: str | None) -> str:
    """What the person is told: the reason in one short plain sentence (app.llm.errors)."""
    return plain_reason(error, secrets)
