"""What deleting a person does to the projects they share (docs/CONTRACT.md, "Projects
and roles"), decided in one place: read for the confirmation page, done in the deleting
transaction.

- A project they are the only member of (not personal) is deleted with them, its
  workspace and chats with it.
- A project they are the only owner of, with other members, passes to one of them: the
  longest-standing editor, else the longest-standing viewer (earliest to join, then the
  lowest member id). That member becomes an owner; nobody else's role changes.
- A project with another owner stays as it is, without them.
- What they made in a project that stays (offers, personas, outputs, assets, characters,
  campaigns) stays with it, its maker NULL (the foreign key's ON DELETE SET NULL).
- The invitations they sent that nobody has accepted yet are withdrawn: a person who is
  gone no longer vouches for anyone (an owner invites again if they want them).
  Accepted ones stay, their inviter NULL.
- Their personal project goes with them (`personal_user_id` cascades), as their chats do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import case, delete, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.accounts.project_models import (
    EDITOR,
    OWNER,
    Project,
    ProjectInvitation,
    ProjectMember,
)


@dataclass(frozen=True)
class Handover:
    """`project` passes to `heir` (who becomes an owner)."""

    project_id: int
    project_name: str
    heir_id: int
    heir_email: str


@dataclass(frozen=True)
class ProjectsOnDeletion:
    passed: list[Handover] = field(default_factory=list)
    # (id, name) of the projects deleted with the person.
    deleted: list[tuple[int, str]] = field(default_factory=list)

    @property
    def deleted_ids(self) -> list[int]:
        return [project_id for project_id, _name in self.deleted]


# Editors before viewers; the earliest to join first.
_HEIR_ORDER = (
    case((ProjectMember.role == EDITOR, 0), else_=1),
    ProjectMember.created_at,
    ProjectMember.id,
)


def projects_on_deletion(session: Session, user_id: int) -> ProjectsOnDeletion:
    """What deleting `user_id` would do to their shared projects; changes nothing."""
    mine = session.execute(
        select(Project.id, Project.name, ProjectMember.role)
        .join(ProjectMember, ProjectMember.project_id == Project.id)
        .where(ProjectMember.user_id == user_id, Project.personal_user_id.is_(None))
        .order_by(Project.id)
    ).all()
    passed: list[Handover] = []
    deleted: list[tuple[int, str]] = []
    for project_id, name, role in mine:
        others = session.execute(
            select(ProjectMember.role, User.id, User.email)
            .join(User, User.id == ProjectMember.user_id)
            .where(ProjectMember.project_id == project_id, ProjectMember.user_id != user_id)
            .order_by(*_HEIR_ORDER)
        ).all()
        if not others:
            deleted.append((project_id, name))
        elif role == OWNER and not any(other.role == OWNER for other in others):
            heir = others[0]
            passed.append(Handover(project_id, name, heir.id, heir.email))
    return ProjectsOnDeletion(passed, deleted)


def settle_projects_before_deletion(session: Session, user_id: int) -> ProjectsOnDeletion:
    """Do what `projects_on_deletion` says but delete nothing yet, in the caller's
    transaction: hand projects over and withdraw open invitations. The caller then deletes
    `deleted_ids` (after reading what runs their chats have going) and the person, and
    commits. The member rows are locked first, so a project cannot lose its heir between
    the decision and the deletion."""
    session.execute(
        select(ProjectMember.id)
        .where(
            ProjectMember.project_id.in_(
                select(ProjectMember.project_id).where(ProjectMember.user_id == user_id)
            )
        )
        .with_for_update()
    ).all()
    plan = projects_on_deletion(session, user_id)
    for handover in plan.passed:
        heir = session.scalars(
            select(ProjectMember).where(
                ProjectMember.project_id == handover.project_id,
                ProjectMember.user_id == handover.heir_id,
            )
        ).one()
        heir.role = OWNER
    session.execute(
        delete(ProjectInvitation).where(
            ProjectInvitation.invited_by_id == user_id, ProjectInvitation.accepted_at.is_(None)
        )
    )
    session.flush()
    return plan
