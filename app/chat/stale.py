"""Staleness: a run whose heartbeat stopped (its process died, or a queue lost it) is
reclaimed by whoever notices first: a read of the conversation, or the periodic sweep.
The run ends as `error`, the conversation is IDLE again, and the person sees that the
reply was interrupted. What the run had persisted stays; nothing is half-written because
every row was its own transaction."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select, update
from sqlalchemy.orm import Session

from app import events as ev
from app.chat.conversations import conversation_dict, row_dict
from app.chat.models import (
    ACTIVE_RUN_STATUSES,
    Conversation,
    ConversationStatus,
    Run,
    RunStatus,
    run_is_active,
)
from app.chat.rows import insert_message
from app.chat.run_services import Publisher
from app.db import Database, rows_changed, utcnow
from app.kinds import RowKind
from app.row_meta import ErrorMeta
from app.telemetry import metrics

log = logging.getLogger(__name__)

INTERRUPTED = "This reply was interrupted before it finished. Send your message again to continue."


@dataclass
class Reclaimed:
    run_id: int
    conversation_id: int
    user_id: int
    row: dict[str, Any]
    conversation: dict[str, Any]


def _stale_before(stale_seconds: float) -> datetime:
    return utcnow() - timedelta(seconds=stale_seconds)


def _last_sign_of_life() -> ColumnElement[datetime]:
    return func.coalesce(Run.heartbeat_at, Run.started_at, Run.created_at)


def reclaim_run(session: Session, run: Run) -> Reclaimed | None:
    """End one stale run (compare-and-set, so two reclaimers cannot both write the row)."""
    result = session.execute(
        update(Run)
        .where(Run.id == run.id, Run.status.in_(ACTIVE_RUN_STATUSES))
        .values(
            status=RunStatus.ERROR, finished_at=utcnow(), error="interrupted: heartbeat stopped"
        )
    )
    if rows_changed(result) != 1:
        return None
    metrics.run_ended(RunStatus.ERROR)  # its process died: how long it ran is unknown
    log.warning(
        "run %s: no sign of life since %s (created %s, started %s); reclaiming",
        run.id,
        run.heartbeat_at,
        run.created_at,
        run.started_at,
    )
    row = insert_message(
        session,
        run.conversation_id,
        role="assistant",
        kind=RowKind.ERROR,
        content=INTERRUPTED,
        meta=ErrorMeta(code="interrupted"),
    )
    session.execute(
        update(Conversation)
        .where(Conversation.id == run.conversation_id)
        .values(status=ConversationStatus.IDLE, active_run_id=None, updated_at=utcnow())
    )
    conversation = session.get_one(Conversation, run.conversation_id)
    return Reclaimed(
        run.id, run.conversation_id, run.user_id, row_dict(row), conversation_dict(conversation)
    )


def stale_runs(
    session: Session, stale_seconds: float, conversation_id: int | None = None
) -> Sequence[Run]:
    # Through the partial index of active runs: every process sweeps every half minute.
    query = select(Run).where(run_is_active(), _last_sign_of_life() < _stale_before(stale_seconds))
    if conversation_id is not None:
        query = query.where(Run.conversation_id == conversation_id)
    return list(session.scalars(query))


def release_orphans(session: Session, conversation_id: int | None = None) -> int:
    """STREAMING conversations whose run is no longer active (a crash between writes
    that were not one transaction in an older version) become IDLE."""
    active = select(Run.id).where(
        Run.id == Conversation.active_run_id, Run.status.in_(ACTIVE_RUN_STATUSES)
    )
    query = (
        update(Conversation)
        .where(
            Conversation.status == ConversationStatus.STREAMING,
            or_(Conversation.active_run_id.is_(None), ~active.exists()),
        )
        .values(status=ConversationStatus.IDLE, active_run_id=None)
    )
    if conversation_id is not None:
        query = query.where(Conversation.id == conversation_id)
    return rows_changed(session.execute(query.execution_options(synchronize_session=False)))


def announce(hub: Publisher, reclaimed: list[Reclaimed]) -> None:
    """Open pages see the interrupted row, the live area close and the composer free up."""
    for item in reclaimed:
        hub.publish(item.conversation_id, ev.RowPersisted(item.row, item.run_id))
        hub.publish(item.conversation_id, ev.Done(item.run_id, RunStatus.ERROR))
        hub.publish_user(item.user_id, ev.ConversationChanged(item.conversation))


def reclaim_if_stale(
    session: Session, conversation_id: int, stale_seconds: float
) -> list[Reclaimed]:
    """The on-read check for one conversation, inside the caller's transaction (the
    caller commits, then announces)."""
    return [
        item
        for run in stale_runs(session, stale_seconds, conversation_id)
        if (item := reclaim_run(session, run)) is not None
    ]


def sweep(
    database: Database, hub: Publisher, stale_seconds: float, orphans: bool = True
) -> list[Reclaimed]:
    """Reclaim every stale run, a conversation a transaction. `orphans`: release orphaned
    conversations too, a write that reads every conversation there is (only an older
    version left them: a process does it once, at its start)."""
    with database.session() as session:
        conversation_ids = {run.conversation_id for run in stale_runs(session, stale_seconds)}
        if orphans:
            release_orphans(session)
        session.commit()
    reclaimed: list[Reclaimed] = []
    for conversation_id in sorted(conversation_ids):
        with database.session() as session:
            reclaimed.extend(reclaim_if_stale(session, conversation_id, stale_seconds))
            session.commit()
    if reclaimed:
        log.warning("reclaimed %d stale run(s): %s", len(reclaimed), [r.run_id for r in reclaimed])
        announce(hub, reclaimed)
    return reclaimed


class StaleSweeper:
    """The periodic sweep, one thread per process (web and worker alike). Jittered so
    several processes do not sweep in lockstep; the compare-and-set makes overlap safe."""

    def __init__(self, database: Database, hub: Publisher, stale_seconds: float) -> None:
        self.database = database
        self.hub = hub
        self.stale_seconds = stale_seconds
        self.interval = max(0.2, min(stale_seconds / 3, 30.0))
        self.sweeps = 0  # sweeps made (for tests and operators reading a process's state)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stale-sweeper", daemon=True)

    def start(self) -> StaleSweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        # Once at start (a restarted process cleans up after its previous life), then
        # every interval.
        first = True
        while True:
            try:
                sweep(self.database, self.hub, self.stale_seconds, orphans=first)
                first = False
                self.sweeps += 1
            except Exception:
                log.exception("stale sweep failed")
            if self._stop.wait(self.interval * random.uniform(0.8, 1.2)):
                return
