"""The host loop: call the model, persist its turn, run its tools, persist their results,
repeat until it answers in text, pauses on a card, or reaches the iteration cap.

State lives in the database: every model call rebuilds the history from rows, so any
process can run any step of any conversation. The loop emits events and renders nothing.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from sqlalchemy import select, update

from app.chat import events as ev
from app.chat.context_window import HostRequestBuilder, PreparedRequest
from app.chat.conversations import conversation_dict, row_dict
from app.chat.models import (
    RUN_AWAITING,
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_ERROR,
    Conversation,
    Message,
    Run,
)
from app.chat.rows import insert_message
from app.chat.runs import awaiting_approval, claim_run, finish_run, run_status
from app.chat.taint import held_for_approval, is_tainted, named_hosts
from app.chat.toolset import widen_to_build
from app.db import utcnow
from app.llm.client import (
    AssistantTurn,
    ContextTooLong,
    ModelError,
    StreamCallbacks,
    StreamCancelled,
)
from app.services import Services
from app.tools.context import ToolContext
from app.tools.registry import Pause, Tool, ToolFailure, ToolResult

log = logging.getLogger(__name__)

CANCEL_POLL_SECONDS = 2.0
ONE_QUESTION = (
    "Only one question can be asked at a time; this one was not shown. "
    "Ask it again after the person answers."
)


class RunCancelled(Exception):
    pass


def execute_run(services: Services, run_id: int) -> str | None:
    """Claim the run and drive it to a final status. A run already claimed or finished
    (a duplicate delivery) is left alone and None is returned."""
    with services.database.session() as session:
        if not claim_run(session, run_id):
            return None
        run = session.get(Run, run_id)
        session.commit()
        host = HostLoop(services, run.id, run.conversation_id, run.user_id)
    return host.run()


class HostLoop:
    def __init__(self, services: Services, run_id: int, conversation_id: int, user_id: int):
        self.services = services
        self.settings = services.settings
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.user_id = user_id
        self.iterations = 0
        self._last_cancel_check = 0.0
        self.tainted = False
        self.named_hosts: set[str] = set()

    # -- the loop ---------------------------------------------------------------------

    def run(self) -> str:
        try:
            status = self._loop()
        except (RunCancelled, StreamCancelled):
            status = RUN_CANCELLED
        except ModelError as error:
            log.warning("run %s: model error %s: %s", self.run_id, error.code, error.message)
            status = self._fail(error.code, _model_error_text(error))
        except Exception:
            log.exception("run %s failed", self.run_id)
            status = self._fail(
                "internal", "Something went wrong while answering. Please try again."
            )
        else:
            status = self._finish(status)
        self.services.cancellations.discard(self.run_id)
        self.emit(ev.Done(self.run_id, status))
        self.announce_conversation()
        return status

    def _loop(self) -> str:
        presenting = self.settle_approved_call()
        with self.services.database.session() as session:
            self.tainted = is_tainted(session, self.conversation_id, self.services.tools)
            self.named_hosts = named_hosts(session, self.conversation_id)
        for _ in range(self.settings.max_iterations):
            turn = self.model_step(tool_choice={"type": "auto"}, presenting=presenting)
            row = self.persist_assistant_turn(turn)
            if not turn.tool_uses:
                self.close_presenting(presenting)
                return RUN_COMPLETED
            if self.run_tools(turn, row):
                self.close_presenting(presenting)
                return RUN_AWAITING
            presenting = True
        # The cap: one last call that may not use tools, so the person always gets a sentence.
        turn = self.model_step(tool_choice={"type": "none"}, presenting=presenting, wrap_up=True)
        self.persist_assistant_turn(_without_tool_uses(turn), final=True)
        self.close_presenting(presenting)
        return RUN_COMPLETED

    # -- one model call -----------------------------------------------------------------

    def model_step(
        self, tool_choice: dict, presenting: bool, wrap_up: bool = False
    ) -> AssistantTurn:
        self.check_cancelled()
        prepared = self.prepare(tool_choice, wrap_up)
        self.iterations += 1
        self.record_iteration()
        if presenting:
            self.emit(ev.Timeline(self.run_id, "presenting", "started"))
        callbacks = StreamCallbacks(
            on_text=lambda text: self.emit(ev.TextDelta(self.run_id, text)),
            should_stop=self.is_cancelled,
        )
        try:
            turn = self.services.model.stream_turn(prepared.request, callbacks)
        except ContextTooLong:
            # Our estimate was off: compact harder once and try again; a second refusal
            # ends the run with a clear error.
            prepared = self.prepare(tool_choice, wrap_up, harder=True)
            turn = self.services.model.stream_turn(prepared.request, callbacks)
        self.services.calibration.record(
            self.conversation_id, prepared.estimated_input, turn.usage.get("input_tokens", 0)
        )
        return turn

    def prepare(self, tool_choice: dict, wrap_up: bool, harder: bool = False) -> PreparedRequest:
        builder = HostRequestBuilder(self.services, self.conversation_id, self.services.calibration)
        prepared = builder.prepare(tool_choice, wrap_up, harder)
        for notice in prepared.notices:
            self.emit(ev.RowPersisted(row_dict(notice), self.run_id))
        return prepared

    def build_request(self, tool_choice: dict, wrap_up: bool) -> dict[str, Any]:
        """The request the next model call would send (history rebuilt from rows)."""
        return self.prepare(tool_choice, wrap_up).request

    # -- persisting ---------------------------------------------------------------------

    def persist_assistant_turn(self, turn: AssistantTurn, final: bool = False) -> Message:
        text = turn.text.strip()
        meta: dict[str, Any] = {"blocks": turn.content, "stop_reason": turn.stop_reason}
        if not text:
            meta["hidden"] = True
        if not turn.content:
            # An empty answer still needs a row the person can see.
            meta = {"hidden": False}
            text = "(The model returned an empty answer.)"
        with self.services.database.session() as session:
            row = insert_message(
                session,
                self.conversation_id,
                role="assistant",
                kind="host",
                content=text,
                meta=meta,
            )
            self._touch(session)
            session.commit()
        if turn.tool_uses and text and not final:
            self.emit(ev.HostTurn(self.run_id, text))
        if not row.hidden:
            self.emit(ev.RowPersisted(row_dict(row), self.run_id))
        return row

    def persist_tool_result(
        self, session, tool_use: dict, tool_name: str, result: ToolResult
    ) -> list[Message]:
        """The hidden result row the model reads, plus any rows shown to the person."""
        block = {
            "type": "tool_result",
            "tool_use_id": tool_use["id"],
            "content": _result_text(result.content),
        }
        if result.is_error:
            block["is_error"] = True
        rows = [
            insert_message(
                session,
                self.conversation_id,
                role="assistant",
                kind=visible["kind"],
                content=visible.get("content", ""),
                meta=visible.get("meta", {}),
            )
            for visible in result.visible_rows
        ]
        rows.append(
            insert_message(
                session,
                self.conversation_id,
                role="user",
                kind="tool_result",
                meta={"blocks": [block], "hidden": True, "tool": tool_name},
            )
        )
        return rows

    # -- tools --------------------------------------------------------------------------

    def run_tools(self, turn: AssistantTurn, assistant_row: Message) -> bool:
        """Run every tool call of the turn; at most one of them may ask the person (a UI
        tool, or a call held for confirmation), and that one is asked last. True when
        the run pauses on it."""
        question: tuple[dict, Tool, Pause | None] | None = None
        for tool_use in turn.tool_uses:
            self.check_cancelled()
            tool = self.services.tools.get(tool_use["name"])
            if tool is not None and tool.category == "ui":
                held: Pause | None = None
            else:
                held = self.call_tool(tool_use, tool)
                if held is None:
                    continue
            if question is None:
                question = (tool_use, tool, held)
                continue
            self.record_result(tool_use, tool.name, ToolResult(ONE_QUESTION, is_error=True))
        if question is None:
            return False
        return self.ask(*question, assistant_row=assistant_row)

    def call_tool(self, tool_use: dict, tool: Tool | None) -> Pause | None:
        """Run one call and persist its result; a call that must be confirmed first comes
        back as its confirmation card instead."""
        name = tool_use["name"]
        if tool is None:
            self.record_result(tool_use, name, ToolResult(f"There is no tool named {name}.", True))
            return None
        problem = tool.validation_error(tool_use.get("input"))
        if problem:
            self.record_result(tool_use, name, ToolResult(problem, is_error=True))
            return None
        if self.tainted:
            held = held_for_approval(tool, tool_use["input"], self.named_hosts)
            if held is not None:
                return held
        stage = "resolving_context" if tool.category == "read" else None
        if stage:
            self.emit(ev.Timeline(self.run_id, stage, "started", detail=name))
        with self.services.database.session() as session:
            context = self.tool_context(session, tool_use)
            if tool.phase == "build":
                widen_to_build(session, self.conversation_id)
            try:
                outcome = tool.handler(context, tool_use["input"])
                if isinstance(outcome, Pause):
                    session.commit()
                    return outcome
                result = _as_result(outcome)
            except ToolFailure as failure:
                session.rollback()
                result = ToolResult(str(failure), is_error=True)
            except (RunCancelled, StreamCancelled):
                raise
            except ModelError as error:
                session.rollback()
                result = ToolResult(
                    f"The {name} tool could not reach the model: {error.message}", True
                )
            except Exception:
                log.exception("tool %s crashed in run %s", name, self.run_id)
                session.rollback()
                result = ToolResult(f"The {name} tool failed unexpectedly.", is_error=True)
            # The tool's own writes and its result rows commit together.
            rows = self.persist_tool_result(session, tool_use, name, result)
            self._touch(session)
            session.commit()
        if tool.untrusted and not result.is_error:
            self.tainted = True
        if stage:
            self.emit(ev.Timeline(self.run_id, stage, "done", detail=name))
        for row in rows:
            if not row.hidden:
                self.emit(ev.RowPersisted(row_dict(row), self.run_id))
        return None

    def record_result(self, tool_use: dict, name: str, result: ToolResult) -> None:
        with self.services.database.session() as session:
            self.persist_tool_result(session, tool_use, name, result)
            session.commit()

    def ask(self, tool_use: dict, tool: Tool, held: Pause | None, assistant_row: Message) -> bool:
        """Show the card and pause: a UI tool's question, or a held call's confirmation.
        A tool that cannot ask (bad input, nothing to choose from) answers the model with
        an error instead, and the loop goes on."""
        with self.services.database.session() as session:
            context = self.tool_context(session, tool_use)
            try:
                pause = held
                if pause is None:
                    problem = tool.validation_error(tool_use.get("input"))
                    if problem:
                        raise ToolFailure(problem)
                    pause = tool.handler(context, tool_use["input"])
                if not isinstance(pause, Pause):
                    raise ToolFailure(f"{tool.name} did not produce a question.")
            except ToolFailure as failure:
                session.rollback()
                self.persist_tool_result(
                    session, tool_use, tool.name, ToolResult(str(failure), True)
                )
                session.commit()
                return False
            card = {
                **pause.card,
                "toolUseId": tool_use["id"],
                "tool": tool.name,
                "status": "awaiting",
            }
            row = session.get(Message, assistant_row.id)
            row.kind = "card"
            row.meta = {**row.meta, "awaiting": tool_use["id"], "card": card, "hidden": False}
            self._touch(session)
            session.commit()
        self.emit(ev.ToolCallCard(self.run_id, tool_use["id"], tool.name, card))
        self.emit(ev.RowPersisted(row_dict(row), self.run_id))
        return True

    def settle_approved_call(self) -> bool:
        """A confirmation the person approved runs now, with the exact arguments on the
        card, exactly once; its result is what the model sees for that tool_use."""
        with self.services.database.session() as session:
            row = awaiting_approval(session, self.conversation_id)
            if row is None:
                return False
            card = row.meta["card"]
            tool = self.services.tools.get(card["tool"])
            tool_use = {"id": card["toolUseId"], "name": card["tool"]}
            context = self.tool_context(session, tool_use)
            try:
                handler = tool.on_approved or tool.handler
                result = _as_result(handler(context, card["arguments"]))
            except ToolFailure as failure:
                session.rollback()
                result = ToolResult(str(failure), is_error=True)
            row = session.get(Message, row.id)
            row.meta = {**row.meta, "card": {**card, "executed": True}}
            rows = self.persist_tool_result(session, tool_use, tool.name, result)
            session.commit()
        for visible in rows:
            if not visible.hidden:
                self.emit(ev.RowPersisted(row_dict(visible), self.run_id))
        return True

    def tool_context(self, session, tool_use: dict) -> ToolContext:
        return ToolContext(
            session=session,
            user_id=self.user_id,
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            services=self.services,
            emit=self.emit,
            tool_use_id=tool_use["id"],
        )

    # -- bookkeeping ----------------------------------------------------------------------

    def emit(self, event: ev.Event) -> None:
        self.services.hub.publish(self.conversation_id, event)

    def announce_conversation(self) -> None:
        """The person's conversation list shows the new status (and title)."""
        with self.services.database.session() as session:
            conversation = session.get(Conversation, self.conversation_id)
            if conversation is None:
                return
            changed = ev.ConversationChanged(conversation_dict(conversation))
        self.services.hub.publish_user(self.user_id, changed)

    def close_presenting(self, presenting: bool) -> None:
        if presenting:
            self.emit(ev.Timeline(self.run_id, "presenting", "done"))

    def is_cancelled(self) -> bool:
        """Stopped here (at once) or from another process (seen within a few seconds)."""
        if self.run_id in self.services.cancellations:
            return True
        now = time.monotonic()
        if now - self._last_cancel_check < CANCEL_POLL_SECONDS:
            return False
        self._last_cancel_check = now
        with self.services.database.session() as session:
            return run_status(session, self.run_id) == RUN_CANCELLED

    def check_cancelled(self) -> None:
        if self.is_cancelled():
            raise RunCancelled()

    def record_iteration(self) -> None:
        with self.services.database.session() as session:
            session.execute(
                update(Run)
                .where(Run.id == self.run_id)
                .values(iterations=self.iterations, heartbeat_at=utcnow())
            )
            session.commit()

    def _touch(self, session) -> None:
        session.execute(
            update(Conversation)
            .where(Conversation.id == self.conversation_id)
            .values(updated_at=utcnow())
        )

    def _finish(self, status: str) -> str:
        with self.services.database.session() as session:
            finished = finish_run(session, self.run_id, status)
            session.commit()
        if finished:
            return status
        # Someone else ended it first (the person pressed Stop, or the sweep reclaimed it).
        with self.services.database.session() as session:
            return session.scalar(select(Run.status).where(Run.id == self.run_id)) or status

    def _fail(self, code: str, message: str) -> str:
        with self.services.database.session() as session:
            if run_status(session, self.run_id) == RUN_CANCELLED:
                return RUN_CANCELLED
            row = insert_message(
                session,
                self.conversation_id,
                role="assistant",
                kind="error",
                content=message,
                meta={"code": code},
            )
            finish_run(session, self.run_id, RUN_ERROR, error=f"{code}: {message}")
            session.commit()
        self.emit(ev.RowPersisted(row_dict(row), self.run_id))
        self.emit(ev.RunError(code, message, self.run_id))
        return RUN_ERROR


def _as_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, Pause):
        return ToolResult("This tool can only be used as a question card.", is_error=True)
    return ToolResult(value)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content or "(no output)"
    return json.dumps(content, ensure_ascii=False, default=str)


def _without_tool_uses(turn: AssistantTurn) -> AssistantTurn:
    content = [b for b in turn.content if b["type"] != "tool_use"]
    return AssistantTurn(content=content, stop_reason=turn.stop_reason, usage=turn.usage)


def _model_error_text(error: ModelError) -> str:
    if error.code in ("overloaded_error", "rate_limit_error"):
        return "The model is busy right now and did not answer. Please try again in a moment."
    if error.code == "connection_error":
        return "Could not reach the model. Check the connection settings and try again."
    if error.code == "context_too_long":
        return (
            "This conversation no longer fits the model's context, even summarized. "
            "Start a new chat to continue."
        )
    if error.code == "authentication_error":
        return "The model refused the API key. An administrator needs to check the settings."
    return f"The model could not answer ({error.code}). Please try again."
