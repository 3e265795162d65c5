"""Projects as JSON (docs/CONTRACT.md, "Projects"): a person's projects, their members and
roles, invitations, and which project a chat works in. Who may do what is decided in one
place (app/accounts/projects.py): a non-member is answered 404, as for an id that does
not exist; a member whose role does not allow it, 403 PROJECT_ROLE."""

from __future__ import annotations

from flask import Blueprint, jsonify, request
from flask_login import current_user, login_required

from app.accounts import projects as rules
from app.accounts.models import User
from app.accounts.project_models import Project, ProjectInvitation, ProjectMember
from app.chat.unread import unread_counts
from app.db import read_transaction
from app.error_codes import ErrorCode
from app.web import project_removal as removal
from app.web.api import body_of
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.openapi import documented
from app.web.project_access import refused as _refused
from app.web.project_access import require as _require
from app.web.project_invites import invite
from app.web.project_shapes import (
    InvitationAccept,
    InvitationList,
    MemberAdd,
    MemberAdded,
    MemberChange,
    MemberList,
    MemberOut,
    ProjectCreate,
    ProjectList,
    ProjectOut,
)
from app.web.socket_access import announce_left_project

bp = Blueprint("projects_api", __name__, url_prefix="/api")

ROLE = (ErrorCode.PROJECT_ROLE,)


def project_dict(project: Project, role: str, unread: int = 0) -> dict:
    return ProjectOut.model_validate(
        {
            "id": project.id,
            "name": project.name,
            "personal": project.personal,
            "role": role,
            "created_at": project.created_at.isoformat() + "Z",
            "unread": unread,
        }
    ).model_dump(mode="json")


def _member_dict(member: ProjectMember, user: User) -> dict:
    return {"user_id": user.id, "email": user.email, "name": user.name, "role": member.role}


def _invitation_dict(invitation: ProjectInvitation, project: Project, accept_url: str = "") -> dict:
    data = {
        "id": invitation.id,
        "project_id": project.id,
        "project_name": project.name,
        "email": invitation.email,
        "role": invitation.role,
        "expires_at": invitation.expires_at.isoformat() + "Z",
    }
    if accept_url:
        data["accept_url"] = accept_url
    return data


# -- projects ---------------------------------------------------------------------------------


@bp.get("/projects")
@documented("GET", "Your projects, with your role in each", response=ProjectList)
@login_required
def list_projects():
    session = db_session()
    with read_transaction(session):
        mine = rules.projects_of(session, current_user.id)
        unread = unread_counts(session, current_user.id)
        return jsonify(
            {"projects": [project_dict(p, role, unread.get(p.id, 0)) for p, role in mine]}
        )


@bp.post("/projects")
@documented(
    "POST",
    "Create a project (you are its owner)",
    response=ProjectOut,
    status=201,
    body=ProjectCreate,
)
@login_required
def create_project():
    body = body_of(ProjectCreate)
    session = db_session()
    try:
        project = rules.create_project(session, current_user.id, body.name)
    except rules.ProjectRefused as refusal:
        raise _refused(refusal) from None
    session.commit()
    return jsonify(project_dict(project, rules.OWNER)), 201


@bp.get("/projects/<int:project_id>")
@documented("GET", "One of your projects", response=ProjectOut)
@login_required
def get_project(project_id: int):
    session = db_session()
    with read_transaction(session):
        role = _require(project_id, rules.READ)
        unread = unread_counts(session, current_user.id).get(project_id, 0)
        return jsonify(project_dict(session.get_one(Project, project_id), role, unread))


@bp.patch("/projects/<int:project_id>")
@documented(
    "PATCH", "Rename a project (owners)", response=ProjectOut, body=ProjectCreate, errors=ROLE
)
@login_required
def rename_project(project_id: int):
    request.get_data(cache=True)  # read before the database is
    session = db_session()
    role = _require(project_id, rules.MANAGE)
    body = body_of(ProjectCreate)
    project = session.get_one(Project, project_id)
    project.name = rules.clean_name(body.name)
    session.commit()
    return jsonify(project_dict(project, role))


@bp.delete("/projects/<int:project_id>")
@documented(
    "DELETE",
    "Delete a project with its workspace and chats (owners; not a personal project)",
    status=204,
    errors=(*ROLE, ErrorCode.CONFLICT),
)
@login_required
def delete_project(project_id: int):
    session = db_session()
    _require(project_id, rules.MANAGE)
    try:
        removal.delete_project(session, project_id)
    except removal.PersonalProject:
        raise ApiError(409, "A personal project cannot be deleted.", ErrorCode.CONFLICT) from None
    return "", 204


# -- members and invitations -----------------------------------------------------------------


@bp.get("/projects/<int:project_id>/members")
@documented("GET", "A project's members and open invitations", response=MemberList)
@login_required
def list_members(project_id: int):
    session = db_session()
    with read_transaction(session):
        role = _require(project_id, rules.READ)
        project = session.get_one(Project, project_id)
        members = [_member_dict(m, u) for m, u in rules.members_of(session, project_id)]
        invitations = []
        if role == rules.OWNER:  # addresses not yet members: the owners' to see
            pending = rules.pending_invitations(session, project_id)
            invitations = [_invitation_dict(i, project) for i in pending]
        return jsonify({"members": members, "invitations": invitations})


@bp.post("/projects/<int:project_id>/members")
@documented(
    "POST",
    "Add a member by email (owners): at once for an account, else an invitation, mailed "
    "when SMTP_URL is set (`mailed`), its link to copy otherwise",
    response=MemberAdded,
    status=201,
    body=MemberAdd,
    errors=(*ROLE, ErrorCode.CONFLICT),
)
@login_required
def add_member(project_id: int):
    request.get_data(cache=True)
    session = db_session()
    _require(project_id, rules.MANAGE)
    body = body_of(MemberAdd)
    try:
        invited = invite(session, project_id, body.email, body.role)
    except rules.ProjectRefused as refusal:
        raise _refused(refusal) from None
    if invited.member is not None:
        assert invited.user is not None
        member = _member_dict(invited.member, invited.user)
        return jsonify({"member": member, "mailed": invited.mailed}), 201
    assert invited.invitation is not None
    project = session.get_one(Project, project_id)
    answer = _invitation_dict(invited.invitation, project, invited.accept_url)
    return jsonify({"invitation": answer, "mailed": invited.mailed}), 201


@bp.patch("/projects/<int:project_id>/members/<int:user_id>")
@documented(
    "PATCH",
    "Change a member's role (owners; a project keeps at least one owner: 409)",
    response=MemberOut,
    body=MemberChange,
    errors=(*ROLE, ErrorCode.CONFLICT),
)
@login_required
def change_member(project_id: int, user_id: int):
    request.get_data(cache=True)
    session = db_session()
    _require(project_id, rules.MANAGE)
    body = body_of(MemberChange)
    try:
        member = rules.change_role(session, project_id, user_id, body.role)
    except rules.ProjectRefused as refusal:
        session.rollback()
        raise _refused(refusal) from None
    session.commit()
    return jsonify(_member_dict(member, session.get_one(User, user_id)))


@bp.delete("/projects/<int:project_id>/members/<int:user_id>")
@documented(
    "DELETE",
    "Remove a member (owners), or leave (any member, with their own id); not the last "
    "owner nor from a personal project: 409; their sockets on its chats close",
    status=204,
    errors=(*ROLE, ErrorCode.CONFLICT),
)
@login_required
def remove_member(project_id: int, user_id: int):
    session = db_session()
    try:
        rules.require_removal(session, current_user.id, project_id, user_id)
        rules.remove_member(session, project_id, user_id)
    except rules.ProjectRefused as refusal:
        session.rollback()
        raise _refused(refusal) from None
    session.commit()
    announce_left_project(user_id, project_id)
    return "", 204


@bp.delete("/projects/<int:project_id>/invitations/<int:invitation_id>")
@documented(
    "DELETE",
    "Revoke an open invitation (owners): its link stops working",
    status=204,
    errors=ROLE,
)
@login_required
def revoke_invitation(project_id: int, invitation_id: int):
    session = db_session()
    _require(project_id, rules.MANAGE)
    try:
        rules.revoke_invitation(session, project_id, invitation_id)
    except rules.ProjectRefused as refusal:
        session.rollback()
        raise _refused(refusal) from None
    session.commit()
    return "", 204


@bp.get("/invitations")
@documented("GET", "The open invitations to your address", response=InvitationList)
@login_required
def list_invitations():
    session = db_session()
    with read_transaction(session):
        found = rules.open_invitations(session, current_user.email)
        return jsonify({"invitations": [_invitation_dict(i, p) for i, p in found]})


@bp.post("/invitations")
@documented(
    "POST",
    "Accept an invitation by its token (only the invited address's account; once)",
    response=ProjectOut,
    status=201,
    body=InvitationAccept,
    errors=(ErrorCode.NOT_FOUND, ErrorCode.CONFLICT),
)
@login_required
def accept_invitation():
    body = body_of(InvitationAccept)
    session = db_session()
    try:
        member = rules.accept_invitation(session, current_user, body.token)
    except rules.ProjectRefused as refusal:
        session.rollback()
        raise _refused(refusal) from None
    session.commit()
    return jsonify(project_dict(session.get_one(Project, member.project_id), member.role)), 201
