"""How a run ends, as functions of its state (app/chat/run_state.py): its last row and final
status, its usage event, its steps and log, and the conversation as the list shows it, each
in one transaction; a failure's error row; a stopped regenerate's older answer shown again.
Each ending says which way the run ended: `Finished` (it wrote its own end) or `Abandoned`
(failed, stopped, or ended elsewhere: what is left is settled after).

A run that ends with the model's answer writes that answer's row in the transaction that
finishes it: the frames are published after the commit, in the order a reader expects
(the row, the timeline's last step, the steps, Done), and counted in the log beforehand so
the finishing transaction writes the whole log."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app import events as ev
from app.billing.meter import record_run_usage
from app.chat.branches import restore_unanswered_fork as restore_unanswered_fork_of
from app.chat.conversations import conversation_dict, row_dict
from app.chat.model_choice import chosen_model_of
from app.chat.models import Conversation, Message, Run, RunStatus
from app.chat.rows import insert_message
from app.chat.run_services import RunServices
from app.chat.run_state import RunFrames, RunIds, RunState
from app.chat.runs import LIST_ITEM_COLUMNS, Released, finish_run, run_status
from app.kinds import RowKind
from app.llm.client import AssistantTurn
from app.llm.web_search import search_sources
from app.row_meta import ErrorMeta, HostMeta

log = logging.getLogger(__name__)

_conversations = Conversation.__table__
# What the person's conversation list shows of it, read when the run's end did not return
# it (app/chat/runs.py finish_run).
_LIST_ITEM = select(*LIST_ITEM_COLUMNS).where(_conversations.c.id == bindparam("conversation_id"))
EMPTY_ANSWER = "(The model returned an empty answer.)"


@dataclass
class MeteredRun:
    """The run as metering reads it, from what its claim returned (no read of the row)."""

    id: int
    user_id: int
    conversation_id: int
    turn_index: int


def assistant_row(turn: AssistantTurn) -> tuple[str, HostMeta]:
    """The content and meta of the row that keeps a model turn (hidden when it has no
    text: the model still reads its blocks)."""
    text = turn.text.strip()
    meta: HostMeta = {"blocks": turn.content, "stop_reason": turn.stop_reason}
    searched = search_sources(turn.content)
    if searched:
        meta["untrusted"] = searched  # the chat is tainted from this turn on
    if not text:
        meta["hidden"] = True
    if not turn.content:
        # An empty answer still needs a row the person can see.
        meta = {"hidden": False}
        text = EMPTY_ANSWER
    return text, meta


@dataclass(frozen=True)
class Finished:
    """The run wrote its own end in one transaction: its final status, usage, steps, log
    (with its Done frame counted) and its conversation's list item."""

    status: str
    listed: ev.ConversationChanged | None  # None: the conversation is gone
    steps_row: Message | None  # the row its steps were kept on, pushed again
    queued: bool = False  # messages wait in the chat's queue


@dataclass(frozen=True)
class Abandoned:
    """The run ended otherwise: failed, stopped, or ended elsewhere (as it was left there).
    Its usage, steps and list item are settled after, and its Done frame is not counted."""

    status: str


Ending = Finished | Abandoned


def answer(
    services: RunServices, state: RunState, frames: RunFrames, turn: AssistantTurn, presenting: bool
) -> Ending:
    """The model answered without tools: the run's end and its row in one transaction,
    then the frames. Nothing is written when the run ended elsewhere (stopped, reclaimed
    as stale, deleted): it ends as it was left."""
    ids = state.ids
    text, meta = assistant_row(turn)
    with services.database.session() as session:
        # The run's row before its conversation's, in the order Stop and the stale sweep
        # take them (on PostgreSQL the opposite order deadlocks with them).
        released = finish_run(session, ids.run_id, RunStatus.COMPLETED)
        if released is None:
            return _ended_elsewhere(session, ids.run_id)
        row = insert_message(
            session,
            ids.conversation_id,
            role="assistant",
            kind=RowKind.HOST,
            content=text,
            meta=meta,
        )
        shown = None if row.hidden else ev.RowPersisted(row_dict(row), ids.run_id)
        closing = ev.Timeline(ids.run_id, "presenting", "done") if presenting else None
        if shown is not None:
            state.steps.row_shown(shown.row)
        frames.count(*(e.kind for e in (shown, closing) if e is not None), ev.Done.kind)
        finished = _finished(services, state, frames, session, released, RunStatus.COMPLETED)
        session.commit()
    for event in (shown, closing):
        if event is not None:
            frames.publish(event)
    return finished


def finish(services: RunServices, state: RunState, frames: RunFrames, status: RunStatus) -> Ending:
    """The final status with the rest of the run's end: one transaction."""
    with services.database.session() as session:
        released = finish_run(session, state.ids.run_id, status)
        if released is None:
            return _ended_elsewhere(session, state.ids.run_id)
        frames.count(ev.Done.kind)
        finished = _finished(services, state, frames, session, released, status)
        session.commit()
    return finished


def fail(
    services: RunServices, state: RunState, frames: RunFrames, code: str, message: str
) -> Abandoned:
    """The run ends in an error row the person sees, and an error frame (nothing when it
    ended elsewhere meanwhile: stopped, reclaimed, or deleted with its chat)."""
    ids = state.ids
    state.log.error(code, message)
    with services.database.session() as session:
        # The run's row first, as in `answer`.
        if finish_run(session, ids.run_id, RunStatus.ERROR, error=f"{code}: {message}") is None:
            return _ended_elsewhere(session, ids.run_id)
        row = insert_message(
            session,
            ids.conversation_id,
            role="assistant",
            kind=RowKind.ERROR,
            content=message,
            meta=ErrorMeta(code=code),
        )
        session.commit()
    frames.emit(ev.RowPersisted(row_dict(row), ids.run_id))
    frames.emit(ev.RunError(code, message, ids.run_id))
    return Abandoned(RunStatus.ERROR)


def _ended_elsewhere(session: Session, run_id: int) -> Abandoned:
    """A run someone else ended first, as they left it: cancelled (Stop), error (the stale
    sweep), or gone with its conversation (taken as cancelled)."""
    ended = run_status(session, run_id)
    session.commit()
    return Abandoned(ended or RunStatus.CANCELLED)


def _finished(
    services: RunServices,
    state: RunState,
    frames: RunFrames,
    session: Session,
    released: Released,
    status: str,
) -> Finished:
    """In the finishing transaction, after the run's final status: its usage, its steps
    kept on its first shown row, its log, and its conversation's list item."""
    if state.model_answers:
        meter(services, state, session, known_run=True)
    steps_row = state.steps.keep(session, state.ids.conversation_id)
    if steps_row is not None:
        frames.count(ev.RowPersisted.kind)  # pushed again with them, before Done
    state.log.write(session)
    item = (
        released.listed
        or session.execute(_LIST_ITEM, {"conversation_id": state.ids.conversation_id}).first()
    )
    if item is None:
        return Finished(status, None, steps_row)
    return Finished(
        status, ev.ConversationChanged(conversation_dict(item)), steps_row, bool(item.queued)
    )


def meter(
    services: RunServices, state: RunState, session: Session | None = None, known_run: bool = False
) -> None:
    """The run's usage event (in the caller's transaction, inside a savepoint, or its own).
    Metering trouble is logged and never fails a run the person already has. `known_run`:
    the run exists (the caller just finished it), so the claim's values do instead of
    reading its row."""
    try:
        if session is None:
            with services.database.session() as own:
                _record_usage(services, state, own, known_run)
                own.commit()
            return
        with session.begin_nested():
            _record_usage(services, state, session, known_run)
    except Exception:
        log.exception("run %s: usage could not be metered", state.ids.run_id)


def _record_usage(
    services: RunServices, state: RunState, session: Session, known_run: bool
) -> None:
    ids = state.ids
    run: MeteredRun | Run | None
    if known_run and ids.turn_index is not None:
        run = MeteredRun(ids.run_id, ids.user_id, ids.conversation_id, ids.turn_index)
    else:
        run = session.get(Run, ids.run_id)
    if run is not None:  # gone with its conversation: nothing to meter
        settings = services.settings
        # The model its requests named; a run that made none is metered on the chat's.
        model = state.model or chosen_model_of(session, settings, ids.conversation_id)
        record_run_usage(session, settings, run, state.billable_calls, model)


def conversation_changed(
    services: RunServices, ids: RunIds, session: Session | None = None
) -> ev.ConversationChanged | None:
    """What the person's conversation list shows now (status and title)."""
    if session is None:
        with services.database.session() as own:
            return conversation_changed(services, ids, own)
    item = session.execute(_LIST_ITEM, {"conversation_id": ids.conversation_id}).first()
    if item is None:
        return None
    return ev.ConversationChanged(conversation_dict(item))


def keep_steps(
    services: RunServices, state: RunState, frames: RunFrames, kept_on: Message | None
) -> None:
    """The run's steps stay on its first shown row (written with the run's final status
    when it finished normally, `kept_on`, else now); open pages get the row again, with
    them."""
    steps = state.steps
    try:
        if kept_on is None and steps.items and not steps.kept:
            with services.database.session() as session:
                kept_on = steps.keep(session, state.ids.conversation_id)
                session.commit()
            if kept_on is not None:
                frames.count(ev.RowPersisted.kind)
        if kept_on is not None:
            frames.publish(ev.RowPersisted(row_dict(kept_on), state.ids.run_id))
    except Exception:
        log.exception("run %s: its steps could not be kept", state.ids.run_id)


def restore_unanswered_fork(services: RunServices, ids: RunIds) -> None:
    """A regenerate stopped before its first row shows the older answer again."""
    try:
        with services.database.session() as session:
            if restore_unanswered_fork_of(session, ids.conversation_id):
                session.commit()
    except Exception:
        log.exception("run %s: the shown branch could not be restored", ids.run_id)


def deleted(services: RunServices, run_id: int) -> bool:
    """The run is gone: deleted with its conversation (False when that cannot be read: the
    failure is then reported as one)."""
    try:
        with services.database.session() as session:
            return run_status(session, run_id) is None
    except Exception:
        return False
