"""Billing tests drive real runs: the app talks to the fake model server, a person is
logged in, and helpers read usage and set allowances straight in the database."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from app.accounts.models import User
from app.billing.models import UsageEvent
from app.chat.models import Message, Run


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


def usage_events(app, user_id=None) -> list[UsageEvent]:
    with app.extensions["database"].session() as session:
        query = select(UsageEvent).order_by(UsageEvent.id)
        if user_id is not None:
            query = query.where(UsageEvent.user_id == user_id)
        return list(session.scalars(query))


def metered(app, user_id, count: int, timeout: float = 5.0) -> list[UsageEvent]:
    """The person's usage events once there are `count` of them: a run is metered just
    after it reports its final status."""
    deadline = time.monotonic() + timeout
    while len(events := usage_events(app, user_id)) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return events


def set_allowance(app, user_id: int, credits: int | None) -> None:
    with app.extensions["database"].session() as session:
        session.get(User, user_id).monthly_credits = credits
        session.commit()


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
