"""Metering: after each run, one usage event keyed `{conversation_id}:chat:{turn_index}`.

The key makes metering idempotent: a run finished twice (a redelivered job, a retry after
a crash) writes one event. The insert ignores the conflict in the database itself, so two
processes racing on the same key also count once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from sqlalchemy import bindparam, column, insert, select, table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.billing.models import UsageEvent
from app.billing.quota import month_of

if TYPE_CHECKING:
    from app.config import Settings


class MeteredModel(Protocol):
    """The model a run answered with, as metering reads it (app.chat.model_choice's
    ChosenModel is one): its name and its credits per run."""

    @property
    def name(self) -> str: ...
    @property
    def credits(self) -> int: ...


class MeteredRun(Protocol):
    """What metering reads of a run (app.chat.models.Run is one)."""

    id: int
    user_id: int
    conversation_id: int
    turn_index: int


# The run's chat's project, read in the insert itself (the chat is a layer above billing:
# named here only by its table). A run whose chat is gone writes no project.
_CHATS = table("conversations", column("id"), column("project_id"))
_PROJECT_OF_CHAT = (
    select(_CHATS.c.project_id).where(_CHATS.c.id == bindparam("chat_id")).scalar_subquery()
)

# Built once per dialect (composing it on every run cost more than running it): the
# event, or nothing when its key was already written.
_INSERT_IGNORING_REPEATS = {
    module.dialect.name: module.insert(UsageEvent.__table__)
    .values(project_id=_PROJECT_OF_CHAT)
    .on_conflict_do_nothing(index_elements=["idempotency_key"])
    .returning(UsageEvent.__table__.c.id)
    for module in (sqlite, postgresql)
}


def usage_key(conversation_id: int, turn_index: int) -> str:
    return f"{conversation_id}:chat:{turn_index}"


def model_weight(settings: Settings, name: str) -> int:
    """What a run on `name` costs before its tool calls, by MODEL_CREDIT_WEIGHTS (a listed
    model may say otherwise: app/chat/model_choice.py)."""
    return settings.model_credit_weights.get(name, settings.default_credit_weight)


def run_credits(
    settings: Settings, billable_tool_calls: int, model: MeteredModel | None = None
) -> int:
    """The run's model's credits (the operator's model when none is given) plus one credit
    per billable tool call. Nothing on the built-in demo model: it runs in-process, and its
    agents' calls are the demo too."""
    if settings.uses_demo_model:
        return 0
    weight = model.credits if model is not None else model_weight(settings, settings.host_model)
    return weight + billable_tool_calls


def record_run_usage(
    session: Session,
    settings: Settings,
    run: MeteredRun,
    billable_tool_calls: int,
    model: MeteredModel | None = None,
) -> bool:
    """Write the run's usage event, with its chat's project and the model it answered
    with (the operator's when none is given), in the caller's transaction (the caller
    commits). False when it was already written."""
    values = {
        "chat_id": run.conversation_id,
        "idempotency_key": usage_key(run.conversation_id, run.turn_index),
        "user_id": run.user_id,
        "conversation_id": run.conversation_id,
        "run_id": run.id,
        "model": model.name if model is not None else settings.host_model_name,
        "billable_tool_calls": billable_tool_calls,
        "credits": run_credits(settings, billable_tool_calls, model),
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
            session.execute(insert(UsageEvent).values(project_id=_PROJECT_OF_CHAT), values)
    except IntegrityError:
        return False
    return True
