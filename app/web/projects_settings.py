"""The Projects page in Settings: one's projects and role in each, new projects, the
invitations to one's own address; and each project's members, where owners rename,
delete, invite, change roles and remove, and every other member reads and may leave.

The rules are app/accounts/projects.py's, as for the JSON API: a non-member is answered
404 (as for an id that does not exist), a role that may not, 403. Every form posts with
its CSRF token and works without JavaScript; htmx swaps the members' section in place."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from app.accounts import projects as rules
from app.accounts.models import User
from app.accounts.project_models import ROLES, Project
from app.db import utcnow
from app.web import project_removal as removal
from app.web.access import is_htmx, require_in_project
from app.web.forms import ConfirmForm, InviteForm, ProjectNameForm
from app.web.identity import db_session
from app.web.project_invites import Invited, invite
from app.web.socket_access import announce_left_project

bp = Blueprint("project_settings", __name__, url_prefix="/settings/projects")


def _list_page(status: int = 200, form: ProjectNameForm | None = None):
    session = db_session()
    me = session.get_one(User, current_user.id)
    return render_template(
        "settings/projects.html",
        projects=rules.projects_of(session, current_user.id),
        invitations=rules.open_invitations(session, me.email),
        address_confirmed=me.email_verified_at is not None,
        form=form or ProjectNameForm(formdata=None),
        confirm=ConfirmForm(),
    ), status


def _project_page(project_id: int, status: int = 200, **shown):
    """The project's page (404 for a non-member): `shown` carries a form with its errors,
    an `error` or `notice` for the members' section, or `invited` (an invitation made)."""
    session = db_session()
    role = require_in_project(project_id, rules.READ)
    project = session.get_one(Project, project_id)
    owner = role == rules.OWNER
    context = {
        "project": project,
        "role": role,
        "owner": owner,
        "members": rules.members_of(session, project_id),
        "invitations": rules.pending_invitations(session, project_id) if owner else [],
        "roles": ROLES,
        "rename_form": ProjectNameForm(formdata=None, name=project.name),
        "invite_form": InviteForm(formdata=None),
        "confirm": ConfirmForm(),
        "error": None,
        "notice": None,
        "invited": None,
        "now": utcnow(),
        **shown,
    }
    return render_template("settings/project.html", **context), status


def _done(project_id: int | None, message: str):
    """After a change: htmx gets the page at once (its members' section swapped in, the
    message in it); a plain form is sent back to the page, the message flashed."""
    if project_id is not None and is_htmx():
        return _project_page(project_id, notice=message)
    flash(message)
    if project_id is None:
        return redirect(url_for("project_settings.projects"), 303)
    return redirect(url_for("project_settings.project", project_id=project_id), 303)


def _refused(project_id: int, refusal: rules.ProjectRefused):
    """A refusal the person can act on, on the page with its status; nothing was written."""
    db_session().rollback()
    if refusal.status in (403, 404):
        abort(refusal.status, refusal.message)
    return _project_page(project_id, refusal.status, error=refusal.message)


@bp.get("")
@login_required
def projects():
    """Your projects with your role in each, a new project, and invitations to you."""
    return _list_page()


@bp.post("")
@login_required
def create():
    """Create a project (you are its owner) and open its page."""
    form = ProjectNameForm()
    if not form.validate():
        return _list_page(400, form)
    session = db_session()
    project = rules.create_project(session, current_user.id, form.name.data)
    session.commit()
    flash(f"{project.name} is made. Invite its members here.")
    return redirect(url_for("project_settings.project", project_id=project.id), 303)


@bp.post("/invitations/<int:invitation_id>/accept")
@login_required
def accept(invitation_id: int):
    """Accept an invitation to your address (only once your address is confirmed; else
    the invitation email's link; 404 for anyone else's)."""
    session = db_session()
    me = session.get_one(User, current_user.id)
    try:
        member = rules.accept_invitation_by_id(session, me, invitation_id)
    except rules.ProjectRefused as refusal:
        session.rollback()
        abort(refusal.status, refusal.message)
    session.commit()
    project = session.get_one(Project, member.project_id)
    flash(f"You joined {project.name} as {member.role}.")
    return redirect(url_for("project_settings.project", project_id=project.id), 303)


@bp.get("/<int:project_id>")
@login_required
def project(project_id: int):
    """A project's members and roles; its owners also rename, invite and delete here."""
    return _project_page(project_id)


@bp.post("/<int:project_id>/rename")
@login_required
def rename(project_id: int):
    """Rename a project (owners)."""
    require_in_project(project_id, rules.MANAGE)
    form = ProjectNameForm()
    if not form.validate():
        return _project_page(project_id, 400, rename_form=form)
    db_session().get_one(Project, project_id).name = rules.clean_name(form.name.data)
    db_session().commit()
    return _done(project_id, f"The project is now called {form.name.data}.")


@bp.post("/<int:project_id>/delete")
@login_required
def delete(project_id: int):
    """Delete a project with its workspace and chats (owners; not a personal project)."""
    require_in_project(project_id, rules.MANAGE)
    session = db_session()
    name = session.get_one(Project, project_id).name
    try:
        removal.delete_project(session, project_id)
    except removal.PersonalProject:
        return _project_page(project_id, 409, error="A personal project cannot be deleted.")
    return _done(None, f"{name} is deleted, with its workspace and chats.")


@bp.post("/<int:project_id>/members")
@login_required
def add(project_id: int):
    """Invite by email with a role (owners): an account joins at once, an address without
    one gets an invitation (mailed; without mail, its link to copy)."""
    require_in_project(project_id, rules.MANAGE)
    form = InviteForm()
    if not form.validate():
        return _project_page(project_id, 400, invite_form=form)
    try:
        invited = invite(db_session(), project_id, form.email.data, form.role.data)
    except rules.ProjectRefused as refusal:
        if db_session().get_one(Project, project_id).personal:  # no invite form there
            return _project_page(project_id, refusal.status, error=refusal.message)
        form.email.errors = [refusal.message]
        return _project_page(project_id, refusal.status, invite_form=form)
    return _project_page(project_id, 201, invited=invited, notice=_invited_notice(invited))


def _invited_notice(invited: Invited) -> str:
    if invited.user is not None and invited.member is not None:
        return f"{invited.user.email} is a member now, as {invited.member.role}."
    assert invited.invitation is not None
    if invited.mailed:
        return f"The invitation was sent to {invited.invitation.email}."
    return f"{invited.invitation.email} is invited. Mail is off here: send them the link."


@bp.post("/<int:project_id>/members/<int:user_id>/role")
@login_required
def change_role(project_id: int, user_id: int):
    """Change a member's role (owners; a project keeps at least one owner)."""
    require_in_project(project_id, rules.MANAGE)
    session = db_session()
    try:
        member = rules.change_role(session, project_id, user_id, request.form.get("role"))
    except rules.ProjectRefused as refusal:
        return _refused(project_id, refusal)
    session.commit()
    user = session.get_one(User, user_id)
    return _done(project_id, f"{user.email} is {member.role} now.")


@bp.post("/<int:project_id>/members/<int:user_id>/remove")
@login_required
def remove(project_id: int, user_id: int):
    """Remove a member (owners), or leave with one's own id (any member); never the last
    owner, nor from a personal project."""
    session = db_session()
    try:
        rules.require_removal(session, current_user.id, project_id, user_id)
        rules.remove_member(session, project_id, user_id)
    except rules.ProjectRefused as refusal:
        return _refused(project_id, refusal)
    email = session.get_one(User, user_id).email
    name = session.get_one(Project, project_id).name
    session.commit()
    announce_left_project(user_id, project_id)
    if user_id == current_user.id:
        return _done(None, f"You left {name}.")
    return _done(project_id, f"{email} is no longer a member.")


@bp.post("/<int:project_id>/invitations/<int:invitation_id>/revoke")
@login_required
def revoke(project_id: int, invitation_id: int):
    """Revoke an open invitation (owners): its link stops working."""
    require_in_project(project_id, rules.MANAGE)
    session = db_session()
    try:
        rules.revoke_invitation(session, project_id, invitation_id)
    except rules.ProjectRefused as refusal:
        return _refused(project_id, refusal)
    session.commit()
    return _done(project_id, "The invitation is revoked: its link no longer works.")
