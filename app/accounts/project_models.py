"""Projects: shared workspaces with members and roles (docs/CONTRACT.md, "Projects").

Every person has a personal project (made with the account; `personal_user_id` names
them); they make more and invite members. The workspace's rows (offers, personas...)
and chats carry the project they belong to; `user_id` on them stays their maker."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, ForeignKey, String, UniqueConstraint, event, insert, select
from sqlalchemy.orm import Mapped, Mapper, mapped_column

from app.accounts.models import User
from app.db import NEVER_REUSED_IDS, Base, utcnow

OWNER, EDITOR, VIEWER = "owner", "editor", "viewer"
ROLES = (OWNER, EDITOR, VIEWER)


class Project(Base):
    __tablename__ = "projects"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(80))
    # The person whose personal project this is (None: a project people made and share).
    # Deleting the person deletes it, and with it its workspace.
    personal_user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), unique=True
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    @property
    def personal(self) -> bool:
        return self.personal_user_id is not None


class ProjectMember(Base):
    __tablename__ = "project_members"
    __table_args__ = (UniqueConstraint("project_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ProjectInvitation(Base):
    """An invitation to an address without an account yet: accepted once, by that
    address's account, within a week. Only the token's digest is stored."""

    __tablename__ = "project_invitations"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    email: Mapped[str] = mapped_column(String(254), index=True)
    role: Mapped[str] = mapped_column(String(16))
    token_digest: Mapped[str] = mapped_column(String(64), unique=True)
    invited_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    accepted_at: Mapped[datetime | None]


def in_personal_project_by_default(model: type[Any]) -> None:
    """A `model` row inserted without a project lands in its maker's personal project:
    what every row was before projects, so code (and tests) that name only the person
    keep today's meaning. Code that works in a project names it."""

    @event.listens_for(model, "before_insert")
    def _default_project(_mapper: Mapper[Any], connection: Connection, target: Any) -> None:
        if target.project_id is None:
            target.project_id = connection.scalar(
                select(Project.id).where(Project.personal_user_id == target.user_id)
            )


PERSONAL_NAME = "Personal"


@event.listens_for(User, "after_insert")
def _personal_project(_mapper: Mapper[Any], connection: Connection, user: User) -> None:
    """Every person has a personal project, made with the account (however it is made:
    sign-up, an admin, the CLI), its owner the person: today's workspace."""
    project_id = connection.scalar(
        insert(Project)
        .values(name=PERSONAL_NAME, personal_user_id=user.id, created_at=utcnow())
        .returning(Project.id)
    )
    connection.execute(
        insert(ProjectMember).values(
            project_id=project_id, user_id=user.id, role=OWNER, created_at=utcnow()
        )
    )
