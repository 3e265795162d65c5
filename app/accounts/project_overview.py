"""Projects as the admin area reads them: everyone's, with their owners and members."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.accounts.project_models import OWNER, Project, ProjectMember


@dataclass(frozen=True)
class Membership:
    """One of a person's projects, as the People page lists it."""

    project_id: int
    name: str
    role: str
    own_personal: bool  # the person's own personal project
    personal_email: str | None  # whose personal project it is, when it is one


def projects_by_person(session: Session) -> dict[int, list[Membership]]:
    """Each person's projects: their personal one first, then the others by name."""
    rows = session.execute(
        select(
            ProjectMember.user_id,
            Project.id,
            Project.name,
            ProjectMember.role,
            Project.personal_user_id,
            User.email,
        )
        .join(Project, Project.id == ProjectMember.project_id)
        .outerjoin(User, User.id == Project.personal_user_id)
        .order_by(
            ProjectMember.user_id,
            case((Project.personal_user_id == ProjectMember.user_id, 0), else_=1),
            Project.name,
            Project.id,
        )
    )
    found: dict[int, list[Membership]] = defaultdict(list)
    for user_id, project_id, name, role, personal_user_id, email in rows:
        found[user_id].append(
            Membership(project_id, name, role, personal_user_id == user_id, email)
        )
    return dict(found)


@dataclass(frozen=True)
class ProjectLine:
    """A project as the admin's list shows it."""

    project: Project
    personal_email: str | None  # whose personal project it is
    owners: list[str]
    members: int


def all_projects(session: Session) -> list[ProjectLine]:
    """Every project: the shared ones by name, then the personal ones by their person."""
    owners: dict[int, list[str]] = defaultdict(list)
    for project_id, email in session.execute(
        select(ProjectMember.project_id, User.email)
        .join(User, User.id == ProjectMember.user_id)
        .where(ProjectMember.role == OWNER)
        .order_by(User.email)
    ):
        owners[project_id].append(email)
    members = dict(
        session.execute(
            select(ProjectMember.project_id, func.count()).group_by(ProjectMember.project_id)
        ).all()
    )
    rows = session.execute(
        select(Project, User.email)
        .outerjoin(User, User.id == Project.personal_user_id)
        .order_by(Project.personal_user_id.is_not(None), Project.name, User.email, Project.id)
    )
    return [
        ProjectLine(project, email, owners.get(project.id, []), int(members.get(project.id, 0)))
        for project, email in rows
    ]
