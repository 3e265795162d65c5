"""Who may do what in a project, in one place (docs/security.md, "Projects").

Actions: `read` (see the workspace, chat without writes), `write` (change the workspace:
offers, personas, outputs, assets, characters, campaigns), `manage` (members, name,
delete). A person who is not a member gets the same answer as for a project that does
not exist (ProjectRefused 404); a member whose role does not allow the action, 403."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, bindparam, delete, func, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.accounts.project_models import (
    EDITOR,
    OWNER,
    PERSONAL_NAME,
    ROLES,
    VIEWER,
    Project,
    ProjectInvitation,
    ProjectMember,
)
from app.db import utcnow
from app.error_codes import ErrorCode

READ, WRITE, MANAGE = "read", "write", "manage"
ALLOWED: dict[str, frozenset[str]] = {
    OWNER: frozenset({READ, WRITE, MANAGE}),
    EDITOR: frozenset({READ, WRITE}),
    VIEWER: frozenset({READ}),
}
NAME_MAX = 80
INVITATION_DAYS = 7


class ProjectRefused(Exception):
    """A refusal the API answers as it is: `status` 400, 403, 404 or 409."""

    def __init__(self, status: int, message: str, code: ErrorCode, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.field = field


def not_found() -> ProjectRefused:
    return ProjectRefused(404, "Not found.", ErrorCode.NOT_FOUND)


def role_refusal(role: str) -> str:
    return f"Your role in this project ({role}) does not allow changes."


def allows(role: str | None, action: str) -> bool:
    return role is not None and action in ALLOWED.get(role, frozenset())


def membership(session: Session, user_id: int, project_id: int) -> str | None:
    """`user_id`'s role in the project, or None when they are not a member."""
    return session.scalar(
        select(ProjectMember.role).where(
            ProjectMember.user_id == user_id, ProjectMember.project_id == project_id
        )
    )


def require(session: Session, user_id: int, project_id: int | None, action: str) -> str:
    """The caller's role when it allows `action`; else ProjectRefused (404 for a
    non-member or no such project, 403 for a role that does not allow it)."""
    role = None if project_id is None else membership(session, user_id, project_id)
    if role is None:
        raise not_found()
    if not allows(role, action):
        message = role_refusal(role) if action == WRITE else "Only the project's owners may."
        raise ProjectRefused(403, message, ErrorCode.PROJECT_ROLE)
    return role


def personal_project_id(session: Session, user_id: int) -> int:
    found = session.scalar(select(Project.id).where(Project.personal_user_id == user_id))
    if found is None:  # an account made before projects, outside the migration (tests)
        return create_personal_project(session, user_id).id
    return found


def create_personal_project(session: Session, user_id: int) -> Project:
    project = Project(name=PERSONAL_NAME, personal_user_id=user_id)
    session.add(project)
    session.flush()
    session.add(ProjectMember(project_id=project.id, user_id=user_id, role=OWNER))
    session.flush()
    return project


def member_projects(user_id: int) -> Select[Any]:
    """The ids of the person's projects, as a subquery (`X.project_id.in_(...)`)."""
    return select(ProjectMember.project_id).where(ProjectMember.user_id == user_id)


def owned_projects(user_id: int) -> Select[Any]:
    """The ids of the projects the person owns, as a subquery."""
    return select(ProjectMember.project_id).where(
        ProjectMember.user_id == user_id, ProjectMember.role == OWNER
    )


def member_project_ids(session: Session, user_id: int) -> list[int]:
    return list(
        session.scalars(select(ProjectMember.project_id).where(ProjectMember.user_id == user_id))
    )


def _projects_with_roles(*columns: Any) -> Select:
    """The person's (`user_id`) projects with their role: the personal one first, then by name."""
    return (
        select(*columns, ProjectMember.role)
        .join(ProjectMember, ProjectMember.project_id == Project.id)
        .where(ProjectMember.user_id == bindparam("user_id"))
        .order_by(Project.personal_user_id.is_(None), func.lower(Project.name), Project.id)
    )


# Built once (composing a statement costs more than running it on every turn).
_PROJECTS_OF = _projects_with_roles(Project)
# What a turn's system prompt needs of them: plain rows, no objects to load.
_PROJECT_NAMES_OF = _projects_with_roles(Project.id, Project.name, Project.personal_user_id)


def projects_of(session: Session, user_id: int) -> list[tuple[Project, str]]:
    """The person's projects with their role: the personal one first, then by name."""
    rows = session.execute(_PROJECTS_OF, {"user_id": user_id}).all()
    return [(project, role) for project, role in rows]


def project_note(session: Session, user_id: int, project_id: int) -> tuple[str, bool]:
    """What the host's system prompt says of the chat's project (nothing for a person
    whose only project is their personal one: today's prompt, else its name and role),
    and whether the person is in several projects. One read."""
    projects = session.execute(_PROJECT_NAMES_OF, {"user_id": user_id}).all()
    if len(projects) <= 1:
        return "", False
    for project in projects:
        if project.id == project_id:
            personal = project.personal_user_id is not None
            name = "your personal project" if personal else f'the project "{project.name}"'
            note = f"## Project\nThis chat works in {name}; your role there is {project.role}."
            if not allows(project.role, WRITE):
                note += " Its workspace can be read but not changed from this chat."
            return note, True
    return "", True


def clean_name(name: object) -> str:
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= NAME_MAX:
        raise ProjectRefused(
            400,
            f"'name' must be 1 to {NAME_MAX} characters.",
            ErrorCode.INVALID_FIELD,
            field="name",
        )
    return name.strip()


def clean_role(role: object) -> str:
    if role not in ROLES:
        raise ProjectRefused(
            400,
            f"'role' must be one of {', '.join(ROLES)}.",
            ErrorCode.INVALID_FIELD,
            field="role",
        )
    return str(role)


def create_project(session: Session, user_id: int, name: object) -> Project:
    project = Project(name=clean_name(name))
    session.add(project)
    session.flush()
    session.add(ProjectMember(project_id=project.id, user_id=user_id, role=OWNER))
    session.flush()
    return project


def members_of(session: Session, project_id: int) -> list[tuple[ProjectMember, User]]:
    rows = session.execute(
        select(ProjectMember, User)
        .join(User, User.id == ProjectMember.user_id)
        .where(ProjectMember.project_id == project_id)
        .order_by(ProjectMember.id)
    ).all()
    return [(member, user) for member, user in rows]


def _owners(session: Session, project_id: int) -> int:
    return session.scalar(  # type: ignore[return-value]  # a count is never NULL
        select(func.count())
        .select_from(ProjectMember)
        .where(ProjectMember.project_id == project_id, ProjectMember.role == OWNER)
    )


def _member_row(session: Session, project_id: int, user_id: int) -> ProjectMember:
    found = session.scalar(
        select(ProjectMember).where(
            ProjectMember.project_id == project_id, ProjectMember.user_id == user_id
        )
    )
    if found is None:
        raise not_found()
    return found


def _refuse_if_last_owner(session: Session, member: ProjectMember, what: str) -> None:
    if member.role == OWNER and _owners(session, member.project_id) <= 1:
        raise ProjectRefused(
            409, f"A project keeps at least one owner: {what}.", ErrorCode.CONFLICT
        )


def change_role(session: Session, project_id: int, user_id: int, role: object) -> ProjectMember:
    member = _member_row(session, project_id, user_id)
    new_role = clean_role(role)
    if new_role != OWNER:
        _refuse_if_last_owner(session, member, "make another member an owner first")
    member.role = new_role
    session.flush()
    return member


def require_removal(session: Session, actor_id: int, project_id: int, user_id: int) -> str:
    """May `actor_id` remove `user_id` from the project: any member may remove themself
    (leave), only owners anyone else. The actor's role, or ProjectRefused (404/403)."""
    return require(session, actor_id, project_id, READ if actor_id == user_id else MANAGE)


def remove_member(session: Session, project_id: int, user_id: int) -> None:
    member = _member_row(session, project_id, user_id)
    project = session.get(Project, project_id)
    if project is not None and project.personal_user_id == user_id:
        raise ProjectRefused(
            409, "Nobody leaves their personal project, nor is removed from it.", ErrorCode.CONFLICT
        )
    _refuse_if_last_owner(session, member, "make another member an owner first")
    session.delete(member)
    session.flush()


def revoke_invitation(session: Session, project_id: int, invitation_id: int) -> None:
    """Withdraw an open invitation of the project (404 for another project's, an accepted
    one, or none): its link stops working at once."""
    invitation = session.scalar(
        select(ProjectInvitation).where(
            ProjectInvitation.id == invitation_id,
            ProjectInvitation.project_id == project_id,
            ProjectInvitation.accepted_at.is_(None),
        )
    )
    if invitation is None:
        raise not_found()
    session.delete(invitation)
    session.flush()


def pending_invitations(session: Session, project_id: int) -> list[ProjectInvitation]:
    """The project's invitations not yet accepted (expired ones too: the owner sees them
    and revokes or invites again), oldest first."""
    return list(
        session.scalars(
            select(ProjectInvitation)
            .where(
                ProjectInvitation.project_id == project_id,
                ProjectInvitation.accepted_at.is_(None),
            )
            .order_by(ProjectInvitation.id)
        )
    )


@dataclass(frozen=True)
class Added:
    """What adding a member by address did: a member added (an account exists), or an
    invitation made, with its raw token (shown once, to the owner who made it)."""

    member: ProjectMember | None = None
    invitation: ProjectInvitation | None = None
    token: str = ""


def add_member(
    session: Session, project_id: int, inviter_id: int, email: object, role: object
) -> Added:
    if not isinstance(email, str) or "@" not in email or len(email.strip()) > 254:
        raise ProjectRefused(
            400, "'email' must be an email address.", ErrorCode.INVALID_FIELD, field="email"
        )
    address = User.normalize_email(email)
    new_role = clean_role(role)
    project = session.get(Project, project_id)
    if project is None:
        raise not_found()
    if project.personal:
        raise ProjectRefused(
            409,
            "A personal project has no other members: make a project to share.",
            ErrorCode.CONFLICT,
        )
    user = session.scalar(select(User).where(User.email == address))
    if user is not None:
        if membership(session, user.id, project_id) is not None:
            raise ProjectRefused(409, "That person is a member already.", ErrorCode.CONFLICT)
        member = ProjectMember(project_id=project_id, user_id=user.id, role=new_role)
        session.add(member)
        session.flush()
        return Added(member=member)
    # Inviting an address again replaces its open invitation: one live link per
    # address and project, with the newest role (the earlier link stops working).
    session.execute(
        delete(ProjectInvitation).where(
            ProjectInvitation.project_id == project_id,
            ProjectInvitation.email == address,
            ProjectInvitation.accepted_at.is_(None),
        )
    )
    token = secrets.token_urlsafe(32)
    invitation = ProjectInvitation(
        project_id=project_id,
        email=address,
        role=new_role,
        token_digest=token_digest(token),
        invited_by_id=inviter_id,
        expires_at=utcnow() + timedelta(days=INVITATION_DAYS),
    )
    session.add(invitation)
    session.flush()
    return Added(invitation=invitation, token=token)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def open_invitations(session: Session, email: str, now: datetime | None = None) -> list[Any]:
    """The unaccepted, unexpired invitations to `email`, with their project."""
    rows = session.execute(
        select(ProjectInvitation, Project)
        .join(Project, Project.id == ProjectInvitation.project_id)
        .where(
            ProjectInvitation.email == User.normalize_email(email),
            ProjectInvitation.accepted_at.is_(None),
            ProjectInvitation.expires_at > (now or utcnow()),
        )
        .order_by(ProjectInvitation.id)
    ).all()
    return [(invitation, project) for invitation, project in rows]


def accept_invitation(session: Session, user: User, token: object) -> ProjectMember:
    """Accept the invitation whose token this is, as `user` (only the invited address's
    account may). 404 for an unknown token, another address's or an expired one; 409
    for one used already (or when the person became a member meanwhile)."""
    if not isinstance(token, str) or not 1 <= len(token) <= 200:
        raise ProjectRefused(
            400, "'token' must be an invitation's token.", ErrorCode.INVALID_FIELD, field="token"
        )
    invitation = session.scalar(
        select(ProjectInvitation)
        .where(ProjectInvitation.token_digest == token_digest(token))
        .with_for_update()
    )
    return _accept(session, user, invitation)


def accept_invitation_by_id(session: Session, user: User, invitation_id: int) -> ProjectMember:
    """Accept an invitation to one's own address without its link: only for an account
    whose address is confirmed (a mailed link reached it), else anyone who signed up
    with someone else's address could join their projects. 404 as for a token; 403
    EMAIL_UNCONFIRMED for an unconfirmed address."""
    invitation = session.scalar(
        select(ProjectInvitation).where(ProjectInvitation.id == invitation_id).with_for_update()
    )
    mine = invitation is not None and invitation.email == User.normalize_email(user.email)
    if mine and user.email_verified_at is None:
        raise ProjectRefused(
            403,
            "Confirm your address first, or open the link in the invitation email.",
            ErrorCode.EMAIL_UNCONFIRMED,
        )
    return _accept(session, user, invitation)


def _accept(session: Session, user: User, invitation: ProjectInvitation | None) -> ProjectMember:
    if (
        invitation is None
        or invitation.email != User.normalize_email(user.email)
        or invitation.expires_at <= utcnow()
    ):
        raise not_found()
    if invitation.accepted_at is not None:
        raise ProjectRefused(409, "That invitation was used already.", ErrorCode.CONFLICT)
    if membership(session, user.id, invitation.project_id) is not None:
        raise ProjectRefused(409, "You are a member already.", ErrorCode.CONFLICT)
    invitation.accepted_at = utcnow()
    member = ProjectMember(project_id=invitation.project_id, user_id=user.id, role=invitation.role)
    session.add(member)
    session.flush()
    return member
