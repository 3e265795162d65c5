"""The monthly credit allowance: what a person has used this month, and whether they may
start another run. Checked before anything of the turn is persisted."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.billing.models import UsageEvent


def month_of(moment: datetime | None = None) -> str:
    """The calendar month in UTC, "2026-11" (naive datetimes are read as UTC)."""
    moment = moment or datetime.now(UTC)
    return f"{moment.year:04d}-{moment.month:02d}"


def next_month_start(month: str) -> str:
    """When the allowance of `month` renews, in words: "2026-11" → "1 December 2026"."""
    year, number = (int(part) for part in month.split("-"))
    year, number = (year + 1, 1) if number == 12 else (year, number + 1)
    return "1 " + datetime(year, number, 1).strftime("%B %Y")


_usage = UsageEvent.__table__
# Read before every run of a person with an allowance: built once (also as a subquery of the
# turn's own read, app/chat/turn_checks.py), with `user_id` and `month` bound per call.
CREDITS_USED = select(func.coalesce(func.sum(_usage.c.credits), 0)).where(
    _usage.c.user_id == bindparam("user_id"), _usage.c.month == bindparam("month")
)


def credits_used(session: Session, user_id: int, month: str) -> int:
    total = session.scalar(CREDITS_USED, {"user_id": user_id, "month": month})
    return int(total or 0)


def quota_exceeded(session: Session, user_id: int, month: str | None = None) -> str | None:
    """Why this person may not start a run this month, or None when they may: the
    credits used this month reached their allowance (None is unlimited)."""
    allowance = session.scalar(select(User.monthly_credits).where(User.id == user_id))
    if allowance is None:
        return None
    month = month or month_of()
    return allowance_used_up(allowance, credits_used(session, user_id, month), month)


def allowance_used_up(allowance: int | None, used: int, month: str) -> str | None:
    """Why `used` credits of `month` leave no room under `allowance`, or None (None is
    unlimited): for a caller that read both itself."""
    if allowance is None or used < allowance:
        return None
    return (
        f"You have used all {allowance} credits of your monthly allowance ({used} used). "
        f"It renews on {next_month_start(month)}; an administrator can raise it sooner."
    )
