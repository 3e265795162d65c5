"""Deleting a person: everything that is theirs goes in one transaction.

The database does the work: every table that names an owner cascades on the users row
(chats with their rows, runs and run logs, attachments, outputs, assets, offers,
personas, memory, usage, tokens), and where a person is named as somebody else's actor
(memory changes an admin made, guideline history) the name is set to NULL: those rows
stay, anonymised. Their sessions end with the row: no cookie can name an account that is
gone, and users ids are never reused (AUTOINCREMENT on SQLite, sequences on PostgreSQL).
It lives in chat, not accounts, because it counts the person's chats and the runs still
answering (accounts sit below chat and know neither)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.chat.models import ACTIVE_RUN_STATUSES, Conversation, Run


@dataclass(frozen=True)
class Deleted:
    email: str
    conversations: int
    active_run_ids: list[int]


def what_deleting_removes(session: Session, user_id: int) -> int:
    """How many chats go with the person (for the confirmation page)."""
    return session.scalar(  # type: ignore[return-value]  # a count is never NULL
        select(func.count()).select_from(Conversation).where(Conversation.user_id == user_id)
    )


def delete_person(session: Session, user: User) -> Deleted:
    """Delete `user` and what is theirs; the caller commits (one transaction) and then
    cancels the runs that were answering (`active_run_ids`)."""
    runs = list(
        session.scalars(
            select(Run.id).where(Run.user_id == user.id, Run.status.in_(ACTIVE_RUN_STATUSES))
        )
    )
    deleted = Deleted(user.email, what_deleting_removes(session, user.id), runs)
    user_id = user.id
    session.expunge(user)
    # A bulk delete, so the database's ON DELETE rules (not the ORM) decide, in one place.
    session.execute(delete(User).where(User.id == user_id))
    return deleted
