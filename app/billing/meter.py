"""Metering: after each run, one usage event keyed `{conversation_id}:chat:{turn_index}`.

The key makes metering idempotent: a run finished twice (a redelivered job, a retry after
a crash) writes one event. The insert ignores the conflict in the database itself, so two
processes racing on the same key also count once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from sqlalchemy import insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.billing.models import UsageEvent
from app.billing.quota import month_of

if TYPE_CHECKING:
    from app.config import Settings


class MeteredRun(Protocol):
    """What metering reads of a run (app.chat.models.Run is one)."""

    id: int
    user_id: int
    conversation_id: int
    turn_index: int


# Built once per dialect (composing it on every run cost more than running it): the
# event, or nothing when its key was already written.
_INSERT_IGNORING_REPEATS = {
    module.dialect.name: module.insert(UsageEvent.__table__)
    .on_conflict_do_nothing(index_elements=["idempotency_key"])
    .returning(UsageEvent.__table__.c.id)
    for module in (sqlite, postgresql)
}


def usage_key(conversation_id: int, turn_index: int) -> str:
    return f"{conversation_id}:chat:{turn_index}"


def run_credits(settings: Settings, billable_tool_calls: int) -> int:
    """The host model's weight plus one credit per billable tool call. Nothing on the
    built-in demo model: it runs in-process, and its agents' calls are the demo too."""
    if settings.uses_demo_model:
        return 0
    weight = settings.model_credit_weights.get(settings.host_model, settings.default_credit_weight)
    return weight + billable_tool_calls


def record_run_usage(
    session: Session, settings: Settings, run: MeteredRun, billable_tool_calls: int
) -> bool:
    """Write the run's usage event in the caller's transaction (the caller commits).
    False when it was already written."""
    values = {
        "idempotency_key": usage_key(run.conversation_id, run.turn_index),
        "user_id": run.user_id,
        "conversation_id": run.conversation_id,
        "run_id": run.id,
        "model": settings.host_model_name,
        "billable_tool_calls": billable_tool_calls,
        "credits": run_credits(settings, billable_tool_calls),
        "month": month_of(),
    }
    statement = _INSERT_IGNORING_REPEATS.get(session.get_bind().dialect.name)
    if statement is not None:
        # A row comes back only when this insert wrote it (rowcount is not reliable for
        # an ORM-session insert on every driver).
        return session.execute(statement, values).scalar() is not None
    # Any other database: the unique key refuses the second insert inside a savepoint.
    try:
        with session.begin_nested():
            session.execute(insert(UsageEvent).values(**values))
    except IntegrityError:
        return False
    return True
