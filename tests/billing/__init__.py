"""What billing tests read straight from the database: usage events and a conversation's
rows and runs."""

from __future__ import annotations

from sqlalchemy import func, select

from app.billing.models import UsageEvent
from app.chat.models import Message, Run
from tests.waiting import eventually


def usage_events(app, user_id=None) -> list[UsageEvent]:
    with app.extensions["database"].session() as session:
        query = select(UsageEvent).order_by(UsageEvent.id)
        if user_id is not None:
            query = query.where(UsageEvent.user_id == user_id)
        return list(session.scalars(query))


def metered(app, user_id, count: int, timeout: float = 5.0) -> list[UsageEvent]:
    """The person's usage events once there are `count` of them: a run is metered just
    after it reports its final status."""
    return eventually(
        lambda: len(events := usage_events(app, user_id)) >= count and events,
        timeout,
        lambda: f"{count} usage events never written: {usage_events(app, user_id)}",
    )


def counts(app, conversation_id: int) -> tuple[int, int]:
    """(message rows, runs) of a conversation: what a refused turn must leave unchanged."""
    with app.extensions["database"].session() as session:
        rows = session.scalar(
            select(func.count(Message.id)).where(Message.conversation_id == conversation_id)
        )
        runs = session.scalar(
            select(func.count(Run.id)).where(Run.conversation_id == conversation_id)
        )
        return rows, runs
