"""Unread chats: a run that ends by itself (an answer, a card, an error) marks its chat
unread (app/chat/runs.py, in the transaction that ends it); the person looking at the
chat marks it read (opening it, or its page visible when the reply lands). The sidebar
shows a dot; each project counts its unread chats. No Flask here."""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.accounts.projects import member_projects
from app.chat.models import Conversation
from app.db import rows_changed


def mark_read(session: Session, conversation_id: int) -> bool:
    """The chat read, in the caller's transaction; False when it was not unread (nothing
    to tell the other tabs)."""
    changed = session.execute(
        update(Conversation)
        .where(Conversation.id == conversation_id, Conversation.unread.is_(True))
        .values(unread=False)
    )
    return rows_changed(changed) == 1


def unread_counts(session: Session, user_id: int) -> dict[int, int]:
    """{project id: the person's unread chats in it} (archived chats do not count), for
    the projects they are still a member of; a project without any is left out."""
    rows = session.execute(
        select(Conversation.project_id, func.count(Conversation.id))
        .where(
            Conversation.user_id == user_id,
            Conversation.unread.is_(True),
            Conversation.archived_at.is_(None),
            Conversation.project_id.in_(member_projects(user_id)),
        )
        .group_by(Conversation.project_id)
    ).all()
    return {project_id: count for project_id, count in rows}
