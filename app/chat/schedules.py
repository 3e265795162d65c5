"""A chat's scheduled messages: the rules for adding, listing, pausing and deleting them,
shared by the JSON API and the chat page's Schedule panel (app/web/schedules.py). The
scheduler that sends them is app/chat/scheduler.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.chat.cron import (
    ScheduleRefused,
    checked_cron,
    cron_from_phrase,
    describe,
    next_run,
    zone,
)
from app.chat.models import Conversation
from app.chat.runs import lock_conversation
from app.chat.schedule_models import ChatSchedule
from app.error_codes import ErrorCode

# "More than a few" per chat are refused: each tick is a run the person pays for.
MAX_SCHEDULES_PER_CHAT = 5


@dataclass(frozen=True)
class ScheduleSpec:
    """What a person asks for: `cron` or `when` (a phrase), the message, their zone."""

    message: str
    timezone: str
    cron: str | None = None
    when: str | None = None


def cron_of(spec: ScheduleSpec) -> str:
    """The spec's cron expression, checked (ScheduleRefused otherwise)."""
    if spec.cron and spec.when:
        raise ScheduleRefused(
            "Give either `cron` or `when`, not both.", ErrorCode.INVALID_SCHEDULE, "when"
        )
    if spec.when:
        return checked_cron(cron_from_phrase(spec.when))
    if not spec.cron:
        raise ScheduleRefused(
            'Say when: a cron expression, or a phrase such as "every weekday at 9:00".',
            ErrorCode.INVALID_SCHEDULE,
            "cron",
        )
    return checked_cron(spec.cron)


def add_schedule(
    session: Session, conversation_id: int, user_id: int, spec: ScheduleSpec, now: datetime
) -> ChatSchedule:
    """A new schedule in the person's chat (checked by the caller to be theirs), its first
    tick computed from `now`. The chat is locked first, so two adds at once cannot both
    pass the limit."""
    cron = cron_of(spec)
    tz = zone(spec.timezone)
    if lock_conversation(session, conversation_id) is None:
        raise ScheduleRefused("Not found.", ErrorCode.NOT_FOUND, "conversation_id", 404)
    count = session.scalar(
        select(func.count(ChatSchedule.id)).where(ChatSchedule.conversation_id == conversation_id)
    )
    if (count or 0) >= MAX_SCHEDULES_PER_CHAT:
        raise ScheduleRefused(
            f"This chat already has {MAX_SCHEDULES_PER_CHAT} scheduled messages: delete one "
            "before adding another.",
            ErrorCode.TOO_MANY_SCHEDULES,
            "cron",
        )
    schedule = ChatSchedule(
        conversation_id=conversation_id,
        user_id=user_id,
        cron=cron,
        timezone=tz.key,
        message=spec.message,
        next_run_at=next_run(cron, tz, now),
        created_at=now,
    )
    session.add(schedule)
    session.flush()
    return schedule


def schedules_of(session: Session, conversation: Conversation) -> list[ChatSchedule]:
    return list(
        session.scalars(
            select(ChatSchedule)
            .where(ChatSchedule.conversation_id == conversation.id)
            .order_by(ChatSchedule.id)
        )
    )


def schedule_in(session: Session, conversation: Conversation, schedule_id: int) -> ChatSchedule:
    """The chat's schedule `schedule_id` (404 as ScheduleRefused for any other)."""
    schedule = session.get(ChatSchedule, schedule_id)
    if schedule is None or schedule.conversation_id != conversation.id:
        raise ScheduleRefused("Not found.", ErrorCode.NOT_FOUND, "schedule_id", 404)
    return schedule


def set_paused(schedule: ChatSchedule, paused: bool, now: datetime) -> None:
    """Pause, or resume from `now`: the ticks missed while paused are not sent."""
    if schedule.paused and not paused:
        schedule.next_run_at = next_run(schedule.cron, zone(schedule.timezone), now)
    schedule.paused = paused


def local_time(value: datetime | None, tz_name: str) -> datetime | None:
    """A naive UTC time as the schedule's zone shows it."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC).astimezone(zone(tz_name))


def _utc(value: datetime | None) -> str | None:
    return value.isoformat() + "Z" if value is not None else None


def schedule_dict(schedule: ChatSchedule) -> dict[str, Any]:
    """The API's view of a schedule (app/web/schedules.py's ScheduleOut)."""
    local = local_time(schedule.next_run_at, schedule.timezone)
    return {
        "id": schedule.id,
        "conversation_id": schedule.conversation_id,
        "cron": schedule.cron,
        "description": describe(schedule.cron),
        "timezone": schedule.timezone,
        "message": schedule.message,
        "paused": schedule.paused,
        "next_run_at": None if schedule.paused else _utc(schedule.next_run_at),
        "next_run_local": None if schedule.paused or local is None else local.isoformat(),
        "last_run_at": _utc(schedule.last_run_at),
        "last_error": schedule.last_error,
        "created_at": _utc(schedule.created_at),
    }
