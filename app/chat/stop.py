"""Stop: the run ends as cancelled, and what the person saw of it stays, in one
transaction (no Flask here).

The text the host streamed in the model call under way is kept as a host row marked
stopped (plain assistant text: the model reads it next time as what it had said). With
nothing streamed, a "Stopped" notice row says what happened. A tool call in flight gets a
tool result saying it was cancelled, so the history stays valid for the API.

The text comes from the hub's live state of the run: exactly what every open page shows,
wherever the run executes. The run's own process notices the stop later (at once here,
within a few seconds elsewhere); from then on it writes nothing (HostLoop.ensure_running
checks before each commit, under the conversation's lock, so a write of the run either
lands before this transaction or not at all).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.chat.branches import current_leaf
from app.chat.models import Conversation, Message, Run
from app.chat.rows import insert_message, insert_tool_result
from app.chat.run_services import Publisher
from app.chat.runs import cancel_active_run
from app.chat.shapes import meta_of
from app.kinds import CardStatus, RowKind
from app.row_meta import Card, HostMeta, NoticeMeta

log = logging.getLogger(__name__)

STOPPED_NOTICE = "Stopped"
CANCELLED_RESULT = (
    "Cancelled: the person pressed Stop before this finished, so it did not complete."
)
# How far back to look for tool calls of the stopped run still waiting for their result.
TAIL_ROWS = 60


@dataclass
class Stopped:
    run: Run
    # The rows people see (the partial answer or the notice), to publish after commit.
    rows: list[Message] = field(default_factory=list)


def stop_active_run(session: Session, hub: Publisher, conversation_id: int) -> Stopped | None:
    """Cancel the conversation's run in flight and keep what was shown of it, in the
    caller's transaction. None when no run is in flight."""
    # The run first, then the conversation (cancel_active_run updates both in that order,
    # as a run's own end does): the conversation's lock is held from here to the commit.
    run = cancel_active_run(session, conversation_id)
    if run is None:
        return None
    stopped = Stopped(run)
    tail = _tail(session, conversation_id)
    for tool_use in _unanswered_tool_uses(tail):
        insert_tool_result(
            session,
            conversation_id,
            tool_use["id"],
            tool_use.get("name", ""),
            CANCELLED_RESULT,
            is_error=True,
        )
        stopped.rows.extend(_close_card_of(tail, tool_use["id"]))
    partial = _streamed_text(hub, conversation_id, run.id)
    if partial and _already_kept(tail, partial):
        partial = ""  # the whole turn was persisted just before; its row will show
    if partial:
        row = insert_message(
            session,
            conversation_id,
            role="assistant",
            kind=RowKind.HOST,
            content=partial,
            meta=HostMeta(
                blocks=[{"type": "text", "text": partial}], stop_reason="stopped", stopped=True
            ),
        )
    elif run.trigger == "regenerate" and _wrote_nothing(session, conversation_id):
        # A regenerate stopped before its first row: the older answer shows again
        # (app.chat.branches.restore_unanswered_fork, when the run ends); no notice.
        return stopped
    else:
        row = insert_message(
            session,
            conversation_id,
            role="assistant",
            kind=RowKind.NOTICE,
            content=STOPPED_NOTICE,
            meta=NoticeMeta(stopped=True),
        )
    stopped.rows.append(row)
    return stopped


def _close_card_of(tail: list[Message], tool_use_id: str) -> list[Message]:
    """The card that asks for the call's answer, closed as dismissed: a stop that lands
    after the card was written and before its run paused on it ends the card too (its
    call has its result now, so an answer to it would be a second one)."""
    for row in tail:
        meta = meta_of(row)
        if row.kind == RowKind.CARD and meta.get("awaiting") == tool_use_id:
            card: Card = {**meta["card"], "status": CardStatus.DISMISSED}
            row.meta = {**row.meta, "card": card, "awaiting": None}
            return [row]
    return []


def _wrote_nothing(session: Session, conversation_id: int) -> bool:
    """Nothing was written on the shown branch since it was chosen."""
    conversation = session.get_one(Conversation, conversation_id)
    return current_leaf(session, conversation) == conversation.branch_leaf_sequence


def _streamed_text(hub: Publisher, conversation_id: int, run_id: int) -> str:
    """What the pages show of the run's current model call. Without it (Redis not
    answering) the stop still happens, with the notice instead."""
    try:
        live = hub.live_state(conversation_id)
    except Exception as error:
        log.warning("stop: the live state of run %s could not be read (%s)", run_id, error)
        return ""
    return live.text.strip() if live.run_id == run_id else ""


def _tail(session: Session, conversation_id: int) -> list[Message]:
    rows = session.scalars(
        select(Message)
        .where(Message.conversation_id == conversation_id)
        .order_by(Message.sequence.desc())
        .limit(TAIL_ROWS)
    ).all()
    return list(reversed(rows))


def _unanswered_tool_uses(tail: list[Message]) -> list[dict[str, Any]]:
    """Tool calls since the person last wrote that have no result row yet."""
    calls: dict[str, dict[str, Any]] = {}
    answered: set[str | None] = set()
    for row in tail:
        if row.kind == RowKind.USER:
            calls.clear()
            answered.clear()
            continue
        for block in meta_of(row).get("blocks") or ():
            if block.get("type") == "tool_use" and row.role == "assistant":
                calls[block["id"]] = block
            elif block.get("type") == "tool_result":
                answered.add(block.get("tool_use_id"))
    return [call for call_id, call in calls.items() if call_id not in answered]


def _already_kept(tail: list[Message], partial: str) -> bool:
    """The run's write of this very text committed just before the stop, and its row was
    not published yet (so the live state still holds the text)."""
    last = tail[-1] if tail else None
    return (
        last is not None
        and last.role == "assistant"
        and last.kind in (RowKind.HOST, RowKind.CARD)
        and last.content.strip() == partial
    )
