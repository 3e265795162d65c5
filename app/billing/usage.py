"""Usage as the admin area shows it: per person, per project and month, summed from usage
events."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.accounts.project_models import Project
from app.billing.models import UsageEvent

MONTH = re.compile(r"^[0-9]{4}-(0[1-9]|1[0-2])$")


@dataclass(frozen=True)
class Usage:
    credits: int = 0
    runs: int = 0
    billable_tool_calls: int = 0


@dataclass(frozen=True)
class PersonUsage:
    user_id: int
    email: str
    allowance: int | None  # None: unlimited
    usage: Usage

    @property
    def remaining(self) -> int | None:
        if self.allowance is None:
            return None
        return max(0, self.allowance - self.usage.credits)


def _sums():
    return (
        func.coalesce(func.sum(UsageEvent.credits), 0),
        func.count(UsageEvent.id),
        func.coalesce(func.sum(UsageEvent.billable_tool_calls), 0),
    )


def usage_by_person(session: Session, month: str) -> list[PersonUsage]:
    """Everyone (so an allowance can be set before any use), with that month's usage;
    the heaviest users first."""
    totals = dict(
        (user_id, Usage(int(credits), int(runs), int(billable)))
        for user_id, credits, runs, billable in session.execute(
            select(UsageEvent.user_id, *_sums())
            .where(UsageEvent.month == month)
            .group_by(UsageEvent.user_id)
        )
    )
    people = session.execute(
        select(User.id, User.email, User.monthly_credits).order_by(User.email)
    ).all()
    lines = [
        PersonUsage(user_id, email, allowance, totals.get(user_id, Usage()))
        for user_id, email, allowance in people
    ]
    return sorted(lines, key=lambda line: -line.usage.credits)


def usage_months(session: Session, current: str) -> list[str]:
    """Months that have usage, and the current one, newest first."""
    months = set(session.scalars(select(UsageEvent.month).distinct()))
    months.add(current)
    return sorted(months, reverse=True)


def _history(session: Session, *where: Any) -> list[tuple[str, Usage]]:
    rows = session.execute(
        select(UsageEvent.month, *_sums())
        .where(*where)
        .group_by(UsageEvent.month)
        .order_by(UsageEvent.month.desc())
    )
    return [
        (month, Usage(int(credits), int(runs), int(billable)))
        for month, credits, runs, billable in rows
    ]


def person_history(session: Session, user_id: int) -> list[tuple[str, Usage]]:
    """One person's usage month by month, newest first."""
    return _history(session, UsageEvent.user_id == user_id)


@dataclass(frozen=True)
class ProjectUsage:
    project_id: int | None  # None: projects deleted since (their usage stays their people's)
    name: str
    personal_email: str | None  # whose personal project this is
    usage: Usage


def project_totals(session: Session, month: str) -> dict[int | None, Usage]:
    """Each project's usage in the month (None: projects deleted since)."""
    return {
        project_id: Usage(int(credits), int(runs), int(billable))
        for project_id, credits, runs, billable in session.execute(
            select(UsageEvent.project_id, *_sums())
            .where(UsageEvent.month == month)
            .group_by(UsageEvent.project_id)
        )
    }


def usage_by_project(session: Session, month: str) -> list[ProjectUsage]:
    """The projects that ran something in the month, the heaviest first."""
    totals = project_totals(session, month)
    named = session.execute(
        select(Project.id, Project.name, User.email)
        .outerjoin(User, User.id == Project.personal_user_id)
        .where(Project.id.in_([key for key in totals if key is not None]))
    ).all()
    lines = [ProjectUsage(pid, name, email, totals[pid]) for pid, name, email in named]
    if None in totals:
        lines.append(ProjectUsage(None, "Deleted projects", None, totals[None]))
    return sorted(lines, key=lambda line: (-line.usage.credits, line.name, line.project_id or 0))


def project_history(session: Session, project_id: int) -> list[tuple[str, Usage]]:
    """One project's usage month by month, newest first."""
    return _history(session, UsageEvent.project_id == project_id)
