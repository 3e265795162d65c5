"""Deleting a project, the one way (the API's DELETE /api/projects/<id>, the Projects
page; an admin's removal may call it too): its chats' attachments, then the project, whose
members, invitations, workspace and chats the database's ON DELETE rules take with it, in
one transaction; then its running replies stop and its members' sockets on it close."""

from __future__ import annotations

from flask import current_app
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.accounts.project_models import Project, ProjectMember
from app.chat.models import ACTIVE_RUN_STATUSES, Conversation, Run
from app.web.socket_access import announce_left_project
from app.workspace.models import Attachment


class PersonalProject(Exception):
    """A personal project is deleted only with its person."""


def delete_project(session: Session, project_id: int) -> None:
    """Delete the project and everything in it, and commit. The caller checked who may
    (an owner, an admin); raises PersonalProject for a personal one, changing nothing."""
    project = session.get_one(Project, project_id)
    if project.personal:
        raise PersonalProject
    members = list(
        session.scalars(select(ProjectMember.user_id).where(ProjectMember.project_id == project_id))
    )
    chats = select(Conversation.id).where(Conversation.project_id == project_id)
    runs = list(
        session.scalars(
            select(Run.id).where(
                Run.conversation_id.in_(chats), Run.status.in_(ACTIVE_RUN_STATUSES)
            )
        )
    )
    # Its usage events stay, counted for their people without a project (SET NULL).
    session.execute(delete(Attachment).where(Attachment.conversation_id.in_(chats)))
    session.expunge(project)
    session.execute(delete(Project).where(Project.id == project_id))
    session.commit()
    cancellations = current_app.extensions["services"].cancellations
    for run_id in runs:  # they stop at their next event
        cancellations.add(run_id)
    for user_id in members:
        announce_left_project(user_id, project_id)
