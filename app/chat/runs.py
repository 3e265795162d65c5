"""Run bookkeeping: start (one active run per conversation, enforced by a unique index),
claim (compare-and-set), finish and cancel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    Row,
    Table,
    bindparam,
    exists,
    func,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.chat.models import (
    ACTIVE_RUN_STATUSES,
    Conversation,
    ConversationStatus,
    Message,
    QueuedMessage,
    Run,
    RunStatus,
)
from app.chat.rows import note_conversation_locked
from app.chat.shapes import card_of, is_confirmation
from app.db import as_loaded, rows_changed, utcnow
from app.kinds import CardStatus, RowKind
from app.row_meta import card_in
from app.telemetry import metrics


class RunConflict(Exception):
    """A run is already in flight for this conversation."""


def lock_conversation(session: Session, conversation_id: int) -> Conversation | None:
    """The conversation, locked for this transaction (SQLite's write lock is already held
    from BEGIN IMMEDIATE; PostgreSQL takes the row lock)."""
    conversation = session.scalar(
        select(Conversation).where(Conversation.id == conversation_id).with_for_update()
    )
    if conversation is not None:
        note_conversation_locked(session, conversation_id)
    return conversation


def active_run(session: Session, conversation_id: int) -> Run | None:
    return session.scalar(
        select(Run).where(
            Run.conversation_id == conversation_id, Run.status.in_(ACTIVE_RUN_STATUSES)
        )
    )


def lock_active_run(session: Session, conversation_id: int) -> Run | None:
    """The conversation's run in flight, its row locked for this transaction, for a writer
    that then takes the conversation too: a run's end, Stop and the stale sweep take the
    run's row before the conversation's, and PostgreSQL ends one of two transactions that
    take them in opposite orders. FOR NO KEY UPDATE: it waits for the run's own writes,
    not for a transaction that only names the run (its log, written under the
    conversation's lock)."""
    return session.scalar(
        select(Run)
        .where(Run.conversation_id == conversation_id, Run.status.in_(ACTIVE_RUN_STATUSES))
        .with_for_update(key_share=True)
    )


_runs = cast(Table, Run.__table__)  # typed as any FromClause
_conversations = cast(Table, Conversation.__table__)  # typed as any FromClause
# Run with every turn, so built once (composing them, and the ORM's flush, cost more than
# running them). The metering key's turn index: runs before this one (the conversation is
# locked), counted inside the INSERT rather than in a round-trip of its own.
_INSERT_RUN = (
    insert(_runs)
    .values(
        turn_index=select(func.count(_runs.c.id))
        .where(_runs.c.conversation_id == bindparam("of_conversation"))
        .scalar_subquery()
    )
    .returning(_runs.c.id, _runs.c.turn_index)
)
_MARK_STREAMING = (
    update(_conversations)
    .where(_conversations.c.id == bindparam("conversation_id"))
    .values(
        status=ConversationStatus.STREAMING,
        active_run_id=bindparam("run_id"),
        updated_at=bindparam("now"),
    )
)


def start_run(session: Session, conversation: Conversation, trigger: str) -> Run:
    """A queued run of the locked `conversation`, which now names it as its active run."""
    now = utcnow()
    values = {
        "conversation_id": conversation.id,
        "user_id": conversation.user_id,
        "status": RunStatus.QUEUED,
        "trigger": trigger,
        "iterations": 0,
        "created_at": now,
    }
    # The caller checked for a run in flight under the conversation's lock, so the unique
    # index (one active run per conversation) is a backstop: on a conflict the whole
    # transaction is rolled back by the caller, hence no savepoint here.
    try:
        inserted = session.execute(
            _INSERT_RUN, {**values, "of_conversation": conversation.id}
        ).one()
    except IntegrityError as error:
        raise RunConflict() from error
    session.execute(
        _MARK_STREAMING, {"conversation_id": conversation.id, "run_id": inserted.id, "now": now}
    )
    # The loaded conversation says what was just written, without a flush of its own.
    set_committed_value(conversation, "status", ConversationStatus.STREAMING)
    set_committed_value(conversation, "active_run_id", inserted.id)
    set_committed_value(conversation, "updated_at", now)
    unset = dict.fromkeys(("error", "started_at", "heartbeat_at", "finished_at"))
    return as_loaded(
        session, Run, {**values, **unset, "id": inserted.id, "turn_index": inserted.turn_index}
    )


class Claimed(NamedTuple):
    """What the claim returns of the run: enough to run it, and to meter it at the end."""

    conversation_id: int
    user_id: int
    turn_index: int


# The run's own bookkeeping, built once and run as Core statements on the tables: composing
# them per call, and the ORM's search for the row among loaded objects, cost more than
# running them.
_CLAIM = (
    update(_runs)
    .where(_runs.c.id == bindparam("run_id"), _runs.c.status == RunStatus.QUEUED)
    .values(status=RunStatus.RUNNING, started_at=bindparam("now"), heartbeat_at=bindparam("now"))
    .returning(_runs.c.conversation_id, _runs.c.user_id, _runs.c.turn_index)
)
_FINISH = (
    update(_runs)
    .where(_runs.c.id == bindparam("run_id"), _runs.c.status == RunStatus.RUNNING)
    .values(status=bindparam("status"), finished_at=bindparam("now"), error=bindparam("error"))
    .returning(_runs.c.conversation_id)
)
# What the person's conversation list shows of a chat (app/chat/conversations.py
# conversation_dict), as a run's end sends it.
_ITEM_FIELDS = tuple(
    _conversations.c[name]
    for name in (
        "id",
        "title",
        "status",
        "updated_at",
        "pinned_at",
        "archived_at",
        "folder",
        "project_id",
        "model",
        "unread",
    )
)
# Whether messages wait in its queue (app/chat/queue_drain.py sends the next one): read with
# it, so a run's end with an empty queue costs no statement more.
LIST_ITEM_COLUMNS = (
    *_ITEM_FIELDS,
    exists().where(QueuedMessage.conversation_id == _conversations.c.id).label("queued"),
    _conversations.c.preset_id,
)
# The same in an UPDATE's RETURNING, where SQLAlchemy names the updated table's columns
# unqualified (SQLite): inside the subquery `id` would be the queued message's own.
_RETURNED_ITEM_COLUMNS = (
    *_ITEM_FIELDS,
    exists()
    .where(QueuedMessage.conversation_id == literal_column("conversations.id"))
    .label("queued"),
    _conversations.c.preset_id,
)
# A run that ends by itself (an answer, a card, an error) leaves its chat unread until the
# person looks at it (app/chat/unread.py); a Stop does not (the person was there). The
# conversation comes back as its list shows it: the run's end reads no row for the list
# (nothing else the run's end writes changes it). Found by its id, and released only if it
# still names the run: `active_run_id` alone has no index, and every conversation of
# every person would be read to find the one.
_RELEASE = (
    update(_conversations)
    .where(
        _conversations.c.id == bindparam("conversation_id"),
        _conversations.c.active_run_id == bindparam("run_id"),
    )
    .values(
        status=bindparam("status"), active_run_id=None, updated_at=bindparam("now"), unread=True
    )
    .returning(*_RETURNED_ITEM_COLUMNS)
)


class Released(NamedTuple):
    """A run finished here: its conversation as the list shows it now, or None when the
    conversation no longer named the run (gone, or its pointer already cleared)."""

    listed: Row[Any] | None


def claim_run(session: Session, run_id: int) -> Claimed | None:
    """queued → running, exactly once however often the job is delivered: the run's
    conversation, person and turn index, or None when it was not queued."""
    claimed = session.execute(_CLAIM, {"run_id": run_id, "now": utcnow()}).first()
    return None if claimed is None else Claimed(*claimed)


def finish_run(
    session: Session, run_id: int, status: RunStatus, error: str | None = None
) -> Released | None:
    """running → a final status; the conversation becomes usable again. None when the
    run was already finished elsewhere (cancelled, or reclaimed as stale)."""
    finished = session.execute(
        _FINISH, {"run_id": run_id, "status": status, "now": utcnow(), "error": error}
    ).first()
    if finished is None:
        return None
    released = ConversationStatus.ERROR if status == RunStatus.ERROR else ConversationStatus.IDLE
    # A Core update: the run's finishing transactions load no conversation object first
    # that it would have to bring up to date (a cancel may: it goes through the ORM).
    listed = session.execute(
        _RELEASE,
        {
            "conversation_id": finished.conversation_id,
            "run_id": run_id,
            "status": released,
            "now": utcnow(),
        },
    ).first()
    if listed is not None:
        # The update holds the conversation's row (PostgreSQL): a row the run writes next
        # in this transaction need not lock it again.
        note_conversation_locked(session, listed.id)
    return Released(listed)


def cancel_active_run(session: Session, conversation_id: int) -> Run | None:
    run = active_run(session, conversation_id)
    if run is None:
        return None
    was_queued = run.status == RunStatus.QUEUED
    result = session.execute(
        update(Run)
        .where(Run.id == run.id, Run.status.in_(ACTIVE_RUN_STATUSES))
        .values(status=RunStatus.CANCELLED, finished_at=utcnow(), error="Stopped by the person.")
    )
    if rows_changed(result) != 1:
        return None
    if was_queued:  # a running one ends in its loop, which counts it
        metrics.run_ended(RunStatus.CANCELLED)
    _release_conversation(session, run, ConversationStatus.IDLE)
    return run


def _release_conversation(session: Session, run: Run, status: ConversationStatus) -> None:
    """The conversation usable again, through the ORM: a conversation the request loaded
    already is brought up to date too. (By its id: see _RELEASE.)"""
    session.execute(
        update(Conversation)
        .where(Conversation.id == run.conversation_id, Conversation.active_run_id == run.id)
        .values(status=status, active_run_id=None, updated_at=utcnow())
    )


def run_status(session: Session, run_id: int) -> str | None:
    return session.scalar(select(Run.status).where(Run.id == run_id))


# Read on every new message: built once, not composed per call.
_LATEST_CARD = (
    select(Message)
    .where(Message.conversation_id == bindparam("conversation_id"), Message.kind == RowKind.CARD)
    .order_by(Message.sequence.desc())
    .limit(1)
)


# Only its meta, for a run that just wants to know whether it must carry out a call first.
_LATEST_CARD_META = (
    select(Message.meta)
    .where(Message.conversation_id == bindparam("conversation_id"), Message.kind == RowKind.CARD)
    .order_by(Message.sequence.desc())
    .limit(1)
)


def latest_card(session: Session, conversation_id: int) -> Message | None:
    """The conversation's latest card row (only the latest can wait or be approved)."""
    return session.scalar(_LATEST_CARD, {"conversation_id": conversation_id})


def waiting(row: Message | None) -> Message | None:
    """`row` when it is a card still waiting for an answer."""
    card = card_of(row)
    if card is None or card.get("status") != CardStatus.AWAITING:
        return None
    return row


def approved_not_run(row: Message | None) -> Message | None:
    """`row` when it is a confirmation approved but not yet carried out."""
    return row if row is not None and _approved_not_run(row.meta) else None


def _approved_not_run(meta: Mapping[str, Any] | None) -> bool:
    """A confirmation approved, or a tool's own question answered, not yet carried on."""
    card = card_in(meta)
    carried_on = card is not None and (is_confirmation(card) or bool(card.get("resume")))
    return carried_on and card is not None and card.get("executed") is False


def awaiting_card(session: Session, conversation_id: int) -> Message | None:
    """The card row still waiting for an answer, if any (only the latest card can be)."""
    return waiting(latest_card(session, conversation_id))


def approval_pending(session: Session, conversation_id: int) -> bool:
    """Whether the latest card is a confirmation approved but not yet carried out (a run
    then carries it out before its first model call)."""
    return _approved_not_run(
        session.scalar(_LATEST_CARD_META, {"conversation_id": conversation_id})
    )


def awaiting_approval(session: Session, conversation_id: int) -> Message | None:
    """The latest card, when it is a confirmation approved but not yet carried out."""
    return approved_not_run(latest_card(session, conversation_id))


class ComposerState(NamedTuple):
    """What the chat's composer shows, as the server knows it: "answering" (a run in
    flight: Stop), "card" (a card waits for its answer) or "idle". `version` orders the
    states a page may receive out of order (an HTTP answer, socket frames, a reconnect):
    2 × the run's id while it is in flight, 2 × the latest run's id + 1 once it ended, 0
    before any run. Run ids are never reused, so a later state never has a smaller one."""

    mode: str
    version: int

    @property
    def busy(self) -> bool:
        return self.mode == "answering"


IDLE_COMPOSER = ComposerState("idle", 0)


def composer_state(session: Session, conversation_id: int) -> ComposerState:
    """The composer's state read now (the caller's transaction sees what was committed)."""
    active = active_run(session, conversation_id)
    if active is not None:
        return ComposerState("answering", 2 * active.id)
    latest = session.scalar(select(func.max(Run.id)).where(Run.conversation_id == conversation_id))
    if latest is None:
        return IDLE_COMPOSER
    mode = "card" if awaiting_card(session, conversation_id) is not None else "idle"
    return ComposerState(mode, 2 * latest + 1)
