"""The host loop: call the model, persist its turn, run its tools, persist their results,
repeat until it answers in text, pauses on a card, or reaches the iteration cap.

State lives in the database: every model call rebuilds the history from rows, so any
process can run any step of any conversation. The loop emits events and renders nothing.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy import bindparam, update

from app import events as ev
from app.chat.context_window import Draft, HostRequestBuilder, PreparedRequest
from app.chat.conversations import row_dict
from app.chat.fitting import TurnTooLarge
from app.chat.liveness import StreamWatch
from app.chat.models import Conversation, Message, Run, RunStatus
from app.chat.rows import insert_message
from app.chat.run_end import RunCancelled, RunEnd, assistant_row
from app.chat.run_log import RunLog
from app.chat.run_services import RunServices
from app.chat.runs import approval_pending, claim_run, run_status
from app.chat.steps import RunSteps
from app.chat.taint import typed_urls, untrusted_sources
from app.chat.titles import propose_title
from app.chat.tool_calls import ToolCalls
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
from app.tools.registry import Tool
from app.tools.results import ToolResult

log = logging.getLogger(__name__)

# The loop's per-step updates, built once (composing them was most of their cost). Core
# statements on the tables, so the ORM does not look for the row among loaded objects:
# each runs in a session of its own, closed after its commit, that never loaded the row.
_TOUCH_CONVERSATION = (
    update(Conversation.__table__)
    .where(Conversation.__table__.c.id == bindparam("conversation_id"))
    .values(updated_at=bindparam("now"))
)
_RECORD_ITERATION = (
    update(Run.__table__)
    .where(Run.__table__.c.id == bindparam("run_id"))
    .values(iterations=bindparam("iterations"), heartbeat_at=bindparam("now"))
)


# The tool choice of every step but the wrap-up at the iteration cap.
AUTO = {"type": "auto"}


def execute_run(services: RunServices, run_id: int) -> str | None:
    """Claim the run and drive it to a final status. A run already claimed or finished
    (a duplicate delivery) is left alone and None is returned."""
    with services.database.session() as session:
        claimed = claim_run(session, run_id)
        if claimed is None:
            # Stopped, or deleted with its conversation, before it began: nothing to cancel.
            return None
        # Before the claim commits: a Stop that follows it finds the run executing here.
        services.cancellations.executing(run_id)
        host = HostLoop(
            services, run_id, claimed.conversation_id, claimed.user_id, claimed.turn_index
        )
        try:
            host.start(session)
        except Exception:
            # Its first request could not be read: claimed without it, the loop reads it
            # again, and a second failure ends the run with an error the person sees.
            log.warning("run %s: its first request was not read with its claim", run_id)
            session.rollback()
            if claim_run(session, run_id) is None:
                services.cancellations.ended(run_id)
                return None
            host = HostLoop(
                services, run_id, claimed.conversation_id, claimed.user_id, claimed.turn_index
            )
        session.commit()
    return host.run()


class HostLoop(ToolCalls, RunEnd):
    def __init__(
        self,
        services: RunServices,
        run_id: int,
        conversation_id: int,
        user_id: int,
        turn_index: int | None = None,
    ):
        """`turn_index`: the run's, when its claim read it (metering needs it)."""
        self.services = services
        self.settings = services.settings
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.user_id = user_id
        self.turn_index = turn_index
        self.iterations = 0
        # The first model call's history and prompt, read when the run was claimed.
        self.first_draft: Draft | None = None
        # The untrusted content the model has been sent (app/chat/taint.py): while there
        # is any, writes and fetches of addresses the person did not type are held.
        self.sources: list[dict[str, Any]] = []
        self.typed_urls: set[str] = set()
        self.run_log = RunLog(services.database, services.settings, run_id, conversation_id)
        self.watch: StreamWatch | None = None
        # Metered after the run: model calls that answered, and calls of billable tools
        # that actually ran without error. A run the model never answered costs nothing.
        self.model_answers = 0
        self.billable_calls = 0
        self.approval_pending = True  # until load_state knows better
        self.branched = False
        self.state_loaded = False
        # The tool calls, kept as the run's "N steps" summary when it ends (app/chat/steps.py).
        self.steps = RunSteps(run_id, services.tools)
        self.steps_row: Message | None = None
        # Whether the Done frame was counted in a log the run's end wrote (app/chat/run_end.py).
        self.done_counted = False

    def start(self, session) -> None:
        """Everything before the first model call, in the transaction that claims the run:
        its state, the first request's history and prompt, and the first iteration's
        count (every transaction saved is CPU and latency before the first token). A run
        that first carries out an approved call drafts its request after that call."""
        # Held while the draft reads them too: a session finds again only what is held.
        conversation, memory = self.load_state(session)
        if not self.approval_pending and self.settings.max_iterations > 0:
            draft = self.request_builder().draft(session, AUTO, False, memory_parts(memory))
            self.first_draft = draft
            self.count_iteration(session)

    def load_state(self, session) -> tuple[Conversation, UserMemory | None]:
        """What the run needs to know before its first model call; the conversation and
        the person's memory it read."""
        conversation = session.get(Conversation, self.conversation_id)
        memory = session.get(UserMemory, self.user_id)
        self.approval_pending = approval_pending(session, self.conversation_id)
        self.sources = untrusted_sources(session, self.conversation_id, self.services.tools, memory)
        self.typed_urls = typed_urls(session, self.conversation_id)
        # A branched conversation (app/chat/branches.py): rows pushed during the run carry
        # no siblings, so clients re-render the shown branch once it ends.
        self.branched = conversation.branch_chosen_at_sequence is not None
        self.state_loaded = True
        return conversation, memory

    @property
    def tainted(self) -> bool:
        return bool(self.sources)

    def read_untrusted(self, tool: Tool | None, result: ToolResult, context=None) -> list:
        """The untrusted content a result carries; the conversation is tainted from now."""
        if result.is_error:
            return []
        found = list(result.untrusted_sources) + list(context.read_untrusted if context else [])
        if tool is not None and tool.untrusted and not found:
            found = [{"tool": tool.name}]
        for source in found:
            if source not in self.sources:
                self.sources.append(source)
        return found

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> str:
        self.watch = self.services.liveness.watch(self.run_id, self.conversation_id)
        status, changed = self._outcome()
        if changed is None:
            # Failed, cancelled or ended elsewhere: metered and read on their own.
            if self.model_answers:
                self.meter()
            changed = self.conversation_changed()
        self.services.cancellations.ended(self.run_id)
        self.keep_steps()
        # Released before Done is published: no keepalive of this run can follow its Done.
        self.services.liveness.release(self.run_id)
        done = ev.Done(self.run_id, status)
        if self.done_counted:
            self.services.hub.publish(self.conversation_id, done)
        else:
            self.emit(done)
        self.run_log.flush()
        if changed is not None:
            self.services.hub.publish_user(self.user_id, changed)
        if status in (RunStatus.COMPLETED, RunStatus.AWAITING):
            # After the chat's first exchange the fast model names it (app/chat/titles.py);
            # the run has ended and no transaction is open.
            propose_title(self.services, self.conversation_id, self.user_id)
        if self.branched:
            self.restore_unanswered_fork()
            self.services.hub.publish(self.conversation_id, ev.BranchChanged())
        return status

    def _outcome(self) -> tuple[str, ev.ConversationChanged | None]:
        """The run's final status, and what its conversation's list item shows when the run
        ended normally (its Done frame counted in the log it wrote then)."""
        try:
            return self._loop()
        except (RunCancelled, StreamCancelled):
            return RunStatus.CANCELLED, None
        except StreamAborted as aborted:
            return self.fail(aborted.reason, _aborted_text(aborted.reason)), None
        except TurnTooLarge as too_large:
            # Nothing was sent: the step alone outgrows the window even shortened.
            return self.fail(too_large.code, too_large.text), None
        except ModelError as error:
            secret = self.settings.anthropic_api_key
            log.warning(
                "run %s: model error %s", self.run_id, redact(error_detail(error), [secret])
            )
            self.run_log.model_error(error)  # the full reason; the person gets the short one
            return self.fail(error.code, _model_error_text(error, secret)), None
        except Exception:
            if self.deleted():
                # Its conversation was deleted under it (a write of the run found it gone):
                # a cancellation, not a failure.
                return RunStatus.CANCELLED, None
            log.exception("run %s failed", self.run_id)
            self.run_log.exception()
            message = "Something went wrong while answering. Please try again."
            return self.fail("internal", message), None

    def _loop(self) -> tuple[str, ev.ConversationChanged | None]:
        if not self.state_loaded:
            with self.services.database.session() as session:
                self.load_state(session)
        presenting = self.settle_approved_call() if self.approval_pending else False
        for _ in range(self.settings.max_iterations):
            turn = self.model_step(tool_choice=AUTO, presenting=presenting)
            if not turn.tool_uses:
                return self.answer(turn, presenting)
            row = self.persist_assistant_turn(turn)
            if self.run_tools(turn, row):
                self.close_presenting(presenting)
                return self.finish(RunStatus.AWAITING)
            presenting = True
        # The cap: one last call that may not use tools, so the person always gets a sentence.
        turn = self.model_step(tool_choice={"type": "none"}, presenting=presenting, wrap_up=True)
        return self.answer(_without_tool_uses(turn), presenting)

    # -- one model call -----------------------------------------------------------------

    def model_step(
        self, tool_choice: dict, presenting: bool, wrap_up: bool = False
    ) -> AssistantTurn:
        self.check_cancelled()
        if presenting:
            # Before the step's transaction, which writes the log with this frame counted.
            self.emit(ev.Timeline(self.run_id, "presenting", "started"))
        prepared = self.prepare(tool_choice, wrap_up, draft=self.next_draft(tool_choice, wrap_up))
        # The working indicator says "retrying" while the SDK retries this call (its
        # "thinking" went out with the message: app.web.chat_actions.start_turn).
        since = int(time.time() * 1000)
        callbacks = StreamCallbacks(
            on_text=self.stream_text,
            on_thinking_start=self.watch and self.watch.reasoning_started,
            on_thinking_end=self.watch and self.watch.reasoning_ended,
            should_stop=self.is_cancelled,
            on_retry=lambda reason: self.emit(ev.Status(self.run_id, "retrying", since, reason)),
            watch=self.watch,
        )
        try:
            turn = self.call_model(prepared, callbacks)
        except ContextTooLong:
            # Our estimate was off: compact harder once and try again; a second refusal
            # ends the run with a clear error.
            prepared = self.prepare(tool_choice, wrap_up, harder=True)
            turn = self.call_model(prepared, callbacks)
        self.model_answers += 1
        self.services.calibration.record(
            self.conversation_id, prepared.estimated_input, turn.usage.get("input_tokens", 0)
        )
        return turn

    def stream_text(self, text: str) -> None:
        """A text delta; none once the run is stopped (Stop kept what had been shown)."""
        if not self.is_cancelled():
            self.emit(ev.TextDelta(self.run_id, text))

    def call_model(self, prepared: PreparedRequest, callbacks: StreamCallbacks) -> AssistantTurn:
        """One streamed model call, recorded in the run log (a failed one too)."""
        with self.run_log.model_call(prepared.request, prepared.estimated_input) as call:
            call.turn = self.services.model.stream_turn(prepared.request, callbacks)
        return call.turn

    def request_builder(self) -> HostRequestBuilder:
        return HostRequestBuilder(self.services, self.conversation_id, self.services.calibration)

    def next_draft(self, tool_choice: dict, wrap_up: bool) -> Draft:
        """The step's history and prompt, read in one transaction with its iteration's
        count (the first step's were read in the transaction that claimed the run)."""
        draft, self.first_draft = self.first_draft, None
        if draft is not None and tool_choice == AUTO and not wrap_up:
            return draft
        with self.services.database.session() as session:
            draft = self.request_builder().draft(session, tool_choice, wrap_up)
            self.count_iteration(session)
            session.commit()
        return draft

    def prepare(
        self, tool_choice: dict, wrap_up: bool, harder: bool = False, draft: Draft | None = None
    ) -> PreparedRequest:
        prepared = self.request_builder().prepare(tool_choice, wrap_up, harder, draft)
        for notice in prepared.notices:
            self.emit(ev.RowPersisted(row_dict(notice), self.run_id))
        return prepared

    def build_request(self, tool_choice: dict, wrap_up: bool) -> dict[str, Any]:
        """The request the next model call would send (history rebuilt from rows)."""
        return self.prepare(tool_choice, wrap_up).request

    # -- persisting ---------------------------------------------------------------------

    def persist_assistant_turn(self, turn: AssistantTurn) -> Message:
        """A turn that calls tools: its row, before the tools run."""
        text, meta = assistant_row(turn)
        with self.services.database.session() as session:
            row = insert_message(
                session,
                self.conversation_id,
                role="assistant",
                kind=RowKind.HOST,
                content=text,
                meta=meta,
            )
            self.touch_conversation(session)
            self.ensure_running(session)
            self.run_log.write(session)
            session.commit()
        if text:
            self.emit(ev.HostTurn(self.run_id, text))
        if not row.hidden:
            self.emit(ev.RowPersisted(row_dict(row), self.run_id))
        return row

    # -- bookkeeping ----------------------------------------------------------------------

    def emit(self, event: ev.Event) -> None:
        self.run_log.frame(event.kind)
        if isinstance(event, ev.RowPersisted):
            self.steps.row_shown(event.row)
        self.services.hub.publish(self.conversation_id, event)

    def close_presenting(self, presenting: bool) -> None:
        if presenting:
            self.emit(ev.Timeline(self.run_id, "presenting", "done"))

    def is_cancelled(self) -> bool:
        """Stopped here (at once) or from another process (seen within a few seconds)."""
        # A stop from another process lands in the database; this process's liveness
        # monitor polls it for every run here at once and fills `cancellations`.
        return self.run_id in self.services.cancellations

    def ensure_running(self, session) -> None:
        """Last step before a write of the run commits (its conversation is locked by
        then): a run stopped, reclaimed or deleted meanwhile writes nothing more. Stop kept
        what the person saw in the transaction that cancelled the run (app.chat.stop)."""
        if run_status(session, self.run_id) != RunStatus.RUNNING:
            session.rollback()
            raise RunCancelled()

    def check_cancelled(self) -> None:
        if self.is_cancelled():
            raise RunCancelled()
        if self.watch is not None and self.watch.aborted:
            raise StreamAborted(self.watch.aborted)

    def count_iteration(self, session) -> None:
        """One more model call, counted with the log of the steps so far in the caller's
        transaction (before the call, so a run that dies in it keeps them)."""
        self.iterations += 1
        session.execute(
            _RECORD_ITERATION,
            {"run_id": self.run_id, "iterations": self.iterations, "now": utcnow()},
        )
        self.run_log.write(session)

    def touch_conversation(self, session) -> None:
        session.execute(
            _TOUCH_CONVERSATION, {"conversation_id": self.conversation_id, "now": utcnow()}
        )


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
