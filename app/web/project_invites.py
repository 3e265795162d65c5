"""Adding a member by address, for the API and the Projects page alike: an account is
added at once (and told by mail), an address without one gets an invitation, mailed once
it is committed. The mail goes off the request (app/mail/sender.py): `mailed` says it was
handed to the SMTP server, not that it arrived; without SMTP_URL it is False and the owner
copies `accept_url` instead."""

from __future__ import annotations

from dataclasses import dataclass

from flask_login import current_user
from sqlalchemy.orm import Session

from app.accounts import projects as rules
from app.accounts.models import User
from app.accounts.project_models import Project, ProjectInvitation, ProjectMember
from app.web.mailing import absolute_url, mail_is_on, send_added_note, send_invitation


@dataclass(frozen=True)
class Invited:
    member: ProjectMember | None
    user: User | None
    invitation: ProjectInvitation | None
    accept_url: str
    mailed: bool


def invite(session: Session, project_id: int, email: object, role: object) -> Invited:
    """Add `email` to the project as `role`, commit, then mail them. ProjectRefused (the
    session rolled back, nothing written) for a bad address or role, a member already,
    or a personal project."""
    try:
        added = rules.add_member(session, project_id, current_user.id, email, role)
    except rules.ProjectRefused:
        session.rollback()
        raise
    session.commit()
    project = session.get_one(Project, project_id)
    inviter = current_user.name
    if added.member is not None:
        user = session.get_one(User, added.member.user_id)
        url = absolute_url("project_settings.project", project_id=project_id)
        send_added_note(user.email, inviter, project.name, url)
        return Invited(added.member, user, None, "", mail_is_on())
    assert added.invitation is not None
    accept_url = absolute_url("projects.invitation", token=added.token)
    send_invitation(added.invitation.email, inviter, project.name, accept_url)
    return Invited(None, None, added.invitation, accept_url, mail_is_on())
