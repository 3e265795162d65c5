"""The host loop's tool calls: running them (a held call waits for the person's
confirmation), asking the person (a card pauses the run), the approved call carried out
once, and their results persisted as the rows the model and the person read. The loop
(app/chat/loop.py) hands it the run's state, frames and guard; it knows nothing of the loop."""

from __future__ import annotations

import time
from enum import Enum
from typing import Any

from sqlalchemy.orm import Session

from app import events as ev
from app.chat.conversations import row_dict
from app.chat.models import Message
from app.chat.provenance import stamped
from app.chat.rows import insert_message, insert_tool_result
from app.chat.run_log import elapsed_ms
from app.chat.run_services import RunServices
from app.chat.run_state import RunCancelled, RunFrames, RunGuard, RunState, touch_conversation
from app.chat.runs import approved_not_run, awaiting_approval
from app.chat.search import index_row
from app.chat.shapes import is_confirmation, meta_of
from app.chat.taint import held_for_approval
from app.chat.toolset import switch_phase, widen_to_build
from app.kinds import CardStatus, RowKind
from app.llm.client import AssistantTurn
from app.row_meta import Card
from app.telemetry import metrics, tracing
from app.tools.context import ToolContext
from app.tools.invoke import invoke
from app.tools.registry import CheckedInput, Tool, ToolRegistry
from app.tools.results import Pause, ToolResult, refusal

# A model turn's tool_use block (or the approved call a card carries: its id and name).
ToolUse = dict[str, Any]

ONE_QUESTION = (
    "Only one question can be asked at a time; this one was not shown. "
    "Ask it again after the person answers."
)


class Settled(Enum):
    """What came of settling an approved card before the model's next step."""

    NOTHING = "nothing"  # no approved call was waiting
    RAN = "ran"  # it ran: its result is shown, the model goes on presenting it
    ASKED = "asked"  # it asked the person something: the run waits for that card


class ToolCalls:
    """The run's tool calls: they read and widen its taint, count its billable calls, log
    and record each call as a step, and send their rows as frames."""

    def __init__(
        self,
        services: RunServices,
        state: RunState,
        frames: RunFrames,
        guard: RunGuard,
        registry: ToolRegistry | None = None,
    ):
        self.services = services
        self.registry = registry or services.tools  # with the person's MCP servers' tools
        self.state = state
        self.ids = state.ids
        self.frames = frames
        self.guard = guard

    def persist_tool_result(
        self,
        session: Session,
        tool_use: ToolUse,
        tool_name: str,
        result: ToolResult,
        untrusted: list[dict[str, Any]] | None = None,
    ) -> list[Message]:
        """The hidden result row the model reads, plus any rows shown to the person."""
        rows = [
            insert_message(
                session,
                self.ids.conversation_id,
                role="assistant",
                kind=visible["kind"],
                content=visible.get("content", ""),
                meta=visible.get("meta", {}),
            )
            for visible in result.visible_rows
        ]
        rows.append(
            insert_tool_result(
                session,
                self.ids.conversation_id,
                tool_use["id"],
                tool_name,
                result.content,
                is_error=result.is_error,
                untrusted=untrusted,
            )
        )
        return rows

    def run_tools(self, turn: AssistantTurn, assistant_row: Message) -> bool:
        """Run every tool call of the turn; at most one of them may ask the person (a UI
        tool, or a call held for confirmation), and that one is asked last. True when
        the run pauses on it."""
        question: tuple[ToolUse, Tool, Pause | None] | None = None
        for tool_use in turn.tool_uses:
            self.guard.check()
            name = tool_use["name"]
            tool = self.registry.get(name)
            if tool is None:
                self.record_result(tool_use, name, refusal(f"There is no tool named {name}."))
                continue
            held: Pause | None = None
            if tool.category != "ui":
                held = self.call_tool(tool_use, tool)
                if held is None:
                    continue
            if question is None:
                question = (tool_use, tool, held)
                continue
            self.record_result(tool_use, tool.name, refusal(ONE_QUESTION))
        if question is None:
            return False
        return self.ask(*question, assistant_row=assistant_row)

    def call_tool(self, tool_use: ToolUse, tool: Tool) -> Pause | None:
        """Run one call and persist its result; a call that must be confirmed first comes
        back as its confirmation card instead."""
        name = tool_use["name"]
        checked = tool.checked_input(tool_use.get("input"))
        if checked.problem:
            self.record_result(tool_use, name, _refused(tool, tool_use, checked), checked.coerced)
            return None
        if self.state.tainted or tool.held_always:
            held = _held(tool, tool_use, checked.arguments, self.state.typed_urls)
            if held is not None:
                return held
        stage: ev.TimelineStage | None = "resolving_context" if tool.category == "read" else None
        if stage:
            self.frames.emit(ev.Timeline(self.ids.run_id, stage, "started", detail=name))
        started = time.monotonic()
        with self.services.database.session() as session:
            context = self.tool_context(session, tool_use)
            with stamped(session, context):
                outcome = invoke(tool, context, checked.arguments)
            if tool.phase == "build" and not (isinstance(outcome, ToolResult) and outcome.is_error):
                widen_to_build(session, self.ids.conversation_id)
            if isinstance(outcome, Pause):
                session.commit()
                return outcome
            # The tool's own writes and its result rows commit together.
            untrusted = self.state.read_untrusted(tool, outcome, context)
            rows = self.persist_tool_result(session, tool_use, name, outcome, untrusted)
            touch_conversation(session, self.ids.conversation_id)
            self.guard.ensure_running(session)
            session.commit()
        self.log_tool_call(tool_use, name, checked.arguments, outcome, started, checked.coerced)
        if tool.billable and not outcome.is_error:
            self.state.billable_calls += 1
        if stage:
            self.frames.emit(ev.Timeline(self.ids.run_id, stage, "done", detail=name))
        self.emit_visible(rows)
        return None

    def record_result(
        self, tool_use: ToolUse, name: str, result: ToolResult, coerced: tuple[str, ...] = ()
    ) -> None:
        with self.services.database.session() as session:
            self.persist_tool_result(session, tool_use, name, result)
            self.guard.ensure_running(session)
            session.commit()
        self.log_tool_call(tool_use, name, tool_use.get("input"), result, time.monotonic(), coerced)

    def log_tool_call(
        self,
        tool_use: ToolUse,
        name: str,
        arguments: Any,
        result: ToolResult,
        started: float,
        coerced: tuple[str, ...] = (),
    ) -> None:
        self.state.log.tool_call(
            name,
            tool_use["id"],
            arguments,
            result.content,
            result.is_error,
            elapsed_ms(started),
            coerced=coerced,
        )
        self.state.steps.tool_call(name, result, elapsed_ms(started))
        metrics.tool_called(name, tool_outcome(result), self.registry.get(name) is not None)

    def ask(
        self, tool_use: ToolUse, tool: Tool, held: Pause | None, assistant_row: Message
    ) -> bool:
        """Show the card and pause: a UI tool's question, or a held call's confirmation.
        A tool that cannot ask (bad input, nothing to choose from) answers the model with
        an error instead, and the loop goes on."""
        started = time.monotonic()
        coerced: tuple[str, ...] = ()
        with self.services.database.session() as session:
            outcome: ToolResult | Pause | None = held
            if outcome is None:
                checked = tool.checked_input(tool_use.get("input"))
                coerced = checked.coerced
                if checked.problem:
                    outcome = refusal(checked.problem)
                else:
                    context = self.tool_context(session, tool_use)
                    outcome = invoke(tool, context, checked.arguments)
            if not isinstance(outcome, Pause):
                if not outcome.is_error:
                    outcome = ToolResult(f"{tool.name} did not produce a question.", True)
                self.persist_tool_result(session, tool_use, tool.name, outcome)
                session.commit()
                self.log_tool_call(
                    tool_use, tool.name, tool_use.get("input"), outcome, started, coerced
                )
                return False
            card, row = self.show_card(session, assistant_row.id, tool_use, tool, outcome)
        self.announce_card(tool_use, tool, card, row, started, coerced)
        return True

    def show_card(
        self, session: Session, row_id: int, tool_use: ToolUse, tool: Tool, pause: Pause
    ) -> tuple[Card, Message]:
        """What the tool showed (a dict of its own), now the awaited card on the turn's
        row, committed."""
        card: Card = {
            **pause.card,
            "toolUseId": tool_use["id"],
            "tool": tool.name,
            "status": CardStatus.AWAITING,
        }
        row = session.get(Message, row_id)
        if row is None:
            raise RunCancelled()  # deleted with its conversation
        row.kind = RowKind.CARD
        row.meta = {**row.meta, "awaiting": tool_use["id"], "card": card, "hidden": False}
        index_row(session, row)  # shown from now on
        touch_conversation(session, self.ids.conversation_id)
        self.guard.ensure_running(session)
        session.commit()
        return card, row

    def announce_card(
        self,
        tool_use: ToolUse,
        tool: Tool,
        card: Card,
        row: Message,
        started: float,
        coerced: tuple[str, ...] = (),
    ) -> None:
        asked = ToolResult({"card shown": card})
        self.log_tool_call(tool_use, tool.name, tool_use.get("input"), asked, started, coerced)
        self.frames.emit(ev.ToolCallCard(self.ids.run_id, tool_use["id"], tool.name, dict(card)))
        self.frames.emit(ev.RowPersisted(row_dict(row), self.ids.run_id))

    def settle_approved_call(self) -> Settled:
        """A confirmation the person approved runs now, with the exact arguments on the
        card, at most once: the card is claimed (marked executed) in a short transaction
        committed before the call, which then runs with no transaction open (it may fetch
        a page or ask a model); its writes and result rows commit together afterwards. A
        run that dies in between leaves the call without a result, which the history
        answers as dismissed (app/chat/history.py); it never runs again. An approved call
        that then asks the person something (an MCP server's question) shows that question
        as the row's card, and the run waits for it."""
        started = time.monotonic()
        claimed = self.claim_approved_card()
        if claimed is None:
            return Settled.NOTHING
        row_id, card = claimed
        tool = self.registry.get(card["tool"])
        tool_use = {"id": card["toolUseId"], "name": card["tool"]}
        context = None
        with self.services.database.session() as session:
            if tool is None:
                result = ToolResult(
                    f"The approved action {card['tool']} is no longer available here, so it "
                    "was not carried out. Tell the person.",
                    is_error=True,
                )
            else:
                context = self.tool_context(session, tool_use)
                with stamped(session, context):
                    outcome = carry_on(tool, context, card)
                if isinstance(outcome, Pause) and not card.get("resume"):
                    shown, row = self.show_card(session, row_id, tool_use, tool, outcome)
                    self.announce_card(tool_use, tool, shown, row, started)
                    return Settled.ASKED
                result = _as_result(outcome)
            untrusted = self.state.read_untrusted(tool, result, context)
            rows = self.persist_tool_result(session, tool_use, card["tool"], result, untrusted)
            self.guard.ensure_running(session)
            session.commit()
        self.log_tool_call(
            tool_use,
            card["tool"],
            card.get("arguments") or (card.get("resume") or {}).get("arguments") or {},
            result,
            started,
        )
        if tool is not None and tool.billable and not result.is_error:
            self.state.billable_calls += 1
        self.emit_visible(rows)
        return Settled.RAN

    def claim_approved_card(self) -> tuple[int, Card] | None:
        """The approved card, marked executed and committed so that nothing carries it out
        again (a second settler waits on the row's lock, then finds it spent); None when
        the latest card is no approved call waiting to run."""
        with self.services.database.session() as session:
            row = awaiting_approval(session, self.ids.conversation_id)
            if row is not None:
                row = approved_not_run(
                    session.get(Message, row.id, with_for_update=True, populate_existing=True)
                )
            if row is None:
                return None
            card: Card = {**meta_of(row)["card"], "executed": True}
            row.meta = {**row.meta, "card": card}
            self.guard.ensure_running(session)
            session.commit()
            return row.id, card

    def emit_visible(self, rows: list[Message]) -> None:
        for row in rows:
            if not row.hidden:
                self.frames.emit(ev.RowPersisted(row_dict(row), self.ids.run_id))

    def tool_context(self, session: Session, tool_use: ToolUse) -> ToolContext:
        return ToolContext(
            session=session,
            user_id=self.ids.user_id,
            conversation_id=self.ids.conversation_id,
            run_id=self.ids.run_id,
            services=self.services,
            emit=self.frames.emit,
            tool_use_id=tool_use["id"],
            should_stop=self.guard.is_cancelled,
            untrusted_sources=list(self.state.sources),
            switch_phase=lambda phase: switch_phase(session, self.ids.conversation_id, phase),
            chat_project_id=self.ids.project_id,
        )


def tool_outcome(result: ToolResult) -> str:
    """How a call ended, as the metrics count it: held (its confirmation card is shown),
    ran (a UI tool's card too), refused (it never reached its handler), or failed."""
    if result.is_error:
        return "refused" if result.refused else "failed"
    shown = result.content.get("card shown") if isinstance(result.content, dict) else None
    return "held" if is_confirmation(shown) else "ran"


def carry_on(tool: Tool, context: ToolContext, card: Card) -> ToolResult | Pause:
    """An approved call with the card's exact arguments, or a call that asked the person
    mid-way going on with their answer."""
    if card.get("resume"):
        arguments = (card.get("resume") or {}).get("arguments") or {}
        return invoke(tool, context, arguments, answered=card)
    return invoke(tool, context, card.get("arguments") or {}, approved=True)


def _as_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, Pause):
        return ToolResult("This tool can only be used as a question card.", is_error=True)
    return ToolResult(value)


def _refused(tool: Tool, tool_use: ToolUse, checked: CheckedInput) -> ToolResult:
    """The result of a call whose input does not fit the tool's schema (traced as refused)."""
    tracing.tool_not_run(
        tool.name, tool_use["id"], tool.category, "refused", checked.problem, tool.origin
    )
    return refusal(checked.problem or "")


def _held(
    tool: Tool, tool_use: ToolUse, arguments: dict[str, Any], typed_urls: set[str]
) -> Pause | None:
    """The call's confirmation card when it must wait for the person's approval (traced)."""
    held = held_for_approval(tool, arguments, typed_urls)
    if held is not None:
        tracing.tool_not_run(tool.name, tool_use["id"], tool.category, "held", None, tool.origin)
    return held
