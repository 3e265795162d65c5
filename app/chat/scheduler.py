"""The scheduler: sends each due scheduled message (app/chat/schedules.py) as the person's
message, through the same turn and run machinery as one they type (submit_message, then
the process's executor: a thread here, or a Dramatiq worker).

Correctness lives in the database, not in there being one scheduler: a tick is claimed by
moving the schedule's `next_run_at` on with a compare-and-set (`UPDATE ... WHERE
next_run_at = :seen`) in the same transaction that records the message and its run, under
the turn's locks (the chat and the person first, then the schedule row, the order every
writer of a chat takes). Two schedulers racing on one tick: one claims and commits, the
other's UPDATE then matches nothing (PostgreSQL re-reads the row it waited for; SQLite has
one writer at a time). So a tick is sent once, or, when its transaction rolls back, not at
all and still due.

A tick whose chat has a run in flight (or whose person has too many), or whose chat was
sent another scheduled message this minute, is not claimed: it waits for the next pass. A tick missed while nothing ran (downtime) is sent once, late,
and the next is computed from now, not from the missed one."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.chat.conversations import conversation_dict, row_dict
from app.chat.cron import NeverFires, next_run, zone
from app.chat.executor import RunExecutor
from app.chat.run_services import Publisher
from app.chat.schedule_models import ChatSchedule
from app.chat.turn_checks import TurnLock, TurnRejected, lock_for_turn
from app.chat.turns import StartedTurn, submit_message
from app.config import Settings
from app.db import Database, read_transaction, rows_changed, utcnow
from app.error_codes import ErrorCode
from app.events import ConversationChanged, RowPersisted, Status

log = logging.getLogger(__name__)

# At most this many ticks a pass: a backlog is worked through pass by pass, oldest first.
PASS_LIMIT = 50
# How often a scheduler looks, by default: a tick is sent within this long of its minute.
PASS_SECONDS = 15.0
# Refusals that pass: the tick waits, unclaimed, for the next pass.
WAIT_FOR_NEXT_PASS = (ErrorCode.RUN_IN_FLIGHT, ErrorCode.TOO_MANY_RUNS)
NOT_YOURS = "The chat is no longer yours (you left its project): nothing was sent."
UNCONFIRMED = "Confirm your email address first: nothing is sent until then."


@dataclass(frozen=True)
class Tick:
    schedule_id: int
    conversation_id: int
    user_id: int
    seen: datetime  # its next_run_at when read: the claim's compare-and-set


@dataclass
class PassReport:
    sent: list[int]  # the runs started
    waiting: list[int]  # schedules whose chat was busy: tried again next pass
    skipped: list[int]  # schedules whose tick passed unsent (`last_error` says why)


@dataclass(frozen=True)
class SchedulerParts:
    """What a pass needs from its process (app/services.py builds them)."""

    database: Database
    hub: Publisher
    executor: RunExecutor
    settings: Settings


def due_ticks(session: Session, now: datetime, limit: int = PASS_LIMIT) -> list[Tick]:
    query = (
        select(
            ChatSchedule.id,
            ChatSchedule.conversation_id,
            ChatSchedule.user_id,
            ChatSchedule.next_run_at,
        )
        .where(ChatSchedule.paused.is_(False), ChatSchedule.next_run_at <= now)
        .order_by(ChatSchedule.next_run_at, ChatSchedule.id)
        .limit(limit)
    )
    return [Tick(*row) for row in session.execute(query)]


def run_due(parts: SchedulerParts, now: datetime | None = None) -> PassReport:
    """One pass: every due tick (up to PASS_LIMIT) sent, waiting or skipped."""
    now = now or utcnow()
    with parts.database.session() as session, read_transaction(session):
        ticks = due_ticks(session, now)
    report = PassReport([], [], [])
    for tick in ticks:
        try:
            _send(parts, tick, now, report)
        except Exception:  # one broken schedule never stops the others
            log.exception("scheduled message %s failed", tick.schedule_id)
    return report


def _claim(session: Session, tick: Tick, now: datetime, error: str | None = None) -> bool:
    """Move the tick's schedule on to its next tick after `now` (the claim), if no one has
    since: True when this transaction owns the tick."""
    schedule = session.get(ChatSchedule, tick.schedule_id)
    if schedule is None:
        return False
    try:
        following = next_run(schedule.cron, zone(schedule.timezone), now)
        paused = False
    except NeverFires:  # its rule changed under it (tzdata): it waits, paused
        following, paused = tick.seen, True
    claimed = session.execute(
        update(ChatSchedule)
        .where(
            ChatSchedule.id == tick.schedule_id,
            ChatSchedule.next_run_at == tick.seen,
            ChatSchedule.paused.is_(False),
        )
        .values(next_run_at=following, last_run_at=now, last_error=error, paused=paused)
        .execution_options(synchronize_session=False)
    )
    return rows_changed(claimed) == 1


def _send(parts: SchedulerParts, tick: Tick, now: datetime, report: PassReport) -> None:
    with parts.database.session() as session:
        # The turn's locks first (the chat and its person), then the claim.
        locked = lock_for_turn(session, tick.conversation_id, tick.user_id)
        if locked is not None and _chat_sent_this_minute(session, tick, now):
            session.rollback()
            report.waiting.append(tick.schedule_id)
            return
        error = _why_not_sent(session, parts.settings, tick, locked)
        if not _claim(session, tick, now, error):
            session.rollback()  # sent by another scheduler, paused or deleted meanwhile
            return
        if locked is None or error is not None:
            session.commit()
            report.skipped.append(tick.schedule_id)
            return
        message = session.get_one(ChatSchedule, tick.schedule_id).message
        try:
            started = submit_message(
                session,
                parts.settings,
                tick.conversation_id,
                tick.user_id,
                message,
                trigger="schedule",
            )
        except TurnRejected as rejection:
            session.rollback()
            _refused(parts, tick, now, rejection, report)
            return
        changed = conversation_dict(locked.conversation)
        session.commit()
    _announce(parts, tick, started, changed)
    report.sent.append(started.run.id)


def _why_not_sent(
    session: Session, settings: Settings, tick: Tick, locked: TurnLock | None
) -> str | None:
    """Why the tick passes unsent (saved as its `last_error`), or None to send it."""
    if locked is None:
        return NOT_YOURS
    if settings.verify_email and session.get_one(User, tick.user_id).email_verified_at is None:
        return UNCONFIRMED
    return None


def _chat_sent_this_minute(session: Session, tick: Tick, now: datetime) -> bool:
    """At most one scheduled message a minute per chat: when another of its schedules sent
    one this minute, this tick waits for the next pass (read under the chat's lock)."""
    minute = now.replace(second=0, microsecond=0)
    other = select(ChatSchedule.id).where(
        ChatSchedule.conversation_id == tick.conversation_id,
        ChatSchedule.id != tick.schedule_id,
        ChatSchedule.last_run_at >= minute,
        ChatSchedule.last_error.is_(None),
    )
    return session.scalar(other.limit(1)) is not None


def _refused(
    parts: SchedulerParts, tick: Tick, now: datetime, rejection: TurnRejected, report: PassReport
) -> None:
    """A busy chat keeps its tick for the next pass; any other refusal (an allowance used
    up) lets the tick pass, saying why, so it is not retried every pass."""
    if rejection.code in WAIT_FOR_NEXT_PASS:
        report.waiting.append(tick.schedule_id)
        return
    with parts.database.session() as session:
        if _claim(session, tick, now, rejection.message[:200]):
            session.commit()
            report.skipped.append(tick.schedule_id)


def _announce(
    parts: SchedulerParts, tick: Tick, started: StartedTurn, changed: dict[str, object]
) -> None:
    """As a message typed in a tab: every open page sees the row and the working indicator,
    the sidebar the chat moving up; then the run is handed over (no transaction open)."""
    for row in started.rows:
        parts.hub.publish(tick.conversation_id, RowPersisted(row_dict(row), started.run.id))
    parts.hub.publish(
        tick.conversation_id, Status(started.run.id, "thinking", int(time.time() * 1000))
    )
    parts.hub.publish_user(tick.user_id, ConversationChanged(changed))
    parts.executor.submit(started.run.id)


class Scheduler:
    """Passes every `seconds`, on a thread of its own (a greenlet under gevent, whose
    waits yield). Started by the serving entry (`make run`, gunicorn's workers, `flask
    serve`) or by `flask scheduler`; never by building an app."""

    def __init__(
        self,
        parts: SchedulerParts,
        seconds: float = PASS_SECONDS,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.parts = parts
        self.seconds = seconds
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.loop, name="scheduler", daemon=True)

    def start(self) -> Scheduler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def pass_once(self) -> PassReport:
        return run_due(self.parts, self.clock())

    def loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.pass_once()
            except Exception:
                log.exception("scheduler pass failed")
            if self._stop.wait(self.seconds):
                return
