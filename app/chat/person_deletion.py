"""Deleting a person: everything that is theirs goes in one transaction.

First their shared projects are settled (app/accounts/person_projects.py: a project
they alone own passes to another member, one they alone belong to is deleted). Then the
database does the work: every table that names an owner cascades on the users row (chats
with their rows, runs and run logs, attachments, their personal project with its
workspace, memory, usage, tokens), and where a person is named as somebody else's actor
or as a shared workspace row's maker (memory changes an admin made, guideline history,
offers... in a project that stays) the name is set to NULL: those rows stay, anonymised. Their sessions end with the row: no cookie can name an account that is
gone, and users ids are never reused (AUTOINCREMENT on SQLite, sequences on PostgreSQL).
It lives in chat, not accounts, because it counts the person's chats and the runs still
answering (accounts sit below chat and know neither)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.accounts.person_projects import ProjectsOnDeletion, settle_projects_before_deletion
from app.accounts.project_models import Project
from app.chat.models import ACTIVE_RUN_STATUSES, Conversation, Run
from app.workspace.models import Attachment


@dataclass(frozen=True)
class Deleted:
    email: str
    conversations: int
    active_run_ids: list[int]
    projects: ProjectsOnDeletion


def what_deleting_removes(session: Session, user_id: int) -> int:
    """How many chats go with the person (for the confirmation page)."""
    return session.scalar(  # type: ignore[return-value]  # a count is never NULL
        select(func.count()).select_from(Conversation).where(Conversation.user_id == user_id)
    )


def delete_person(session: Session, user: User) -> Deleted:
    """Delete `user` and what is theirs; the caller commits (one transaction) and then
    cancels the runs that were answering (`active_run_ids`)."""
    user_id = user.id
    chats = what_deleting_removes(session, user_id)
    projects = settle_projects_before_deletion(session, user_id)
    # A project deleted with them may hold chats of former members: those go too (as
    # when an owner deletes a project), their attachments with them.
    in_deleted = select(Conversation.id).where(Conversation.project_id.in_(projects.deleted_ids))
    runs = list(
        session.scalars(
            select(Run.id).where(
                or_(Run.user_id == user_id, Run.conversation_id.in_(in_deleted)),
                Run.status.in_(ACTIVE_RUN_STATUSES),
            )
        )
    )
    deleted = Deleted(user.email, chats, runs, projects)
    session.execute(delete(Attachment).where(Attachment.conversation_id.in_(in_deleted)))
    session.execute(delete(Project).where(Project.id.in_(projects.deleted_ids)))
    session.expunge(user)
    # A bulk delete, so the database's ON DELETE rules (not the ORM) decide, in one place.
    session.execute(delete(User).where(User.id == user_id))
    return deleted
