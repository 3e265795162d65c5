"""Project pages: the workspace pages' project switcher, and an invitation's accept link
(the owner copies it from the API's answer or the project's members; mailing it is the
mailer's, later)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask import session as flask_session
from flask_login import current_user, login_required
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts import projects as rules
from app.accounts.models import User
from app.accounts.project_models import VIEWER, Project, ProjectInvitation
from app.chat.models import Conversation
from app.db import read_transaction, utcnow
from app.web.access import PAGE_PROJECT_KEY, page_project_id
from app.web.forms import ConfirmForm
from app.web.identity import db_session

bp = Blueprint("projects", __name__)


@bp.route("/invitations/<token>", methods=["GET", "POST"])
@login_required
def invitation(token: str):
    """The invitation, for the invited address's account to accept (404 for anyone else,
    an unknown or expired token: never which)."""
    form = ConfirmForm()
    session = db_session()
    if form.validate_on_submit():
        try:
            member = rules.accept_invitation(session, current_user, token)
        except rules.ProjectRefused as refusal:
            session.rollback()
            abort(refusal.status, refusal.message)
        session.commit()
        project = session.get_one(Project, member.project_id)
        flash(f"You joined {project.name} as {member.role}.")
        return redirect(url_for("chat.index"))
    with read_transaction(session):
        found = session.execute(
            select(ProjectInvitation, Project)
            .join(Project, Project.id == ProjectInvitation.project_id)
            .where(ProjectInvitation.token_digest == rules.token_digest(token[:200]))
        ).first()
        if (
            found is None
            or found[0].email != User.normalize_email(current_user.email)
            or found[0].expires_at <= utcnow()
        ):
            abort(404)
        invitation, project = found
        return render_template(
            "projects/invitation.html", invitation=invitation, project=project, form=form
        )


@bp.app_context_processor
def _switcher() -> dict:
    """`project_switcher()` for the workspace pages: the person's projects to choose
    from, or nothing for a person with only their personal one (the page as before)."""
    return {"project_switcher": _switcher_choices}


def _switcher_choices() -> list[dict]:
    if not current_user.is_authenticated:
        return []
    projects = rules.projects_of(db_session(), current_user.id)
    if len(projects) <= 1:
        return []
    shown = page_project_id()
    return [
        {
            "id": project.id,
            "label": ("Personal" if project.personal else project.name) + f" ({role})",
            "current": project.id == shown,
        }
        for project, role in projects
    ]


@bp.post("/projects/current")
@login_required
def switch():
    """The project the workspace pages show from now on (404 for one not yours)."""
    raw = request.form.get("project_id", "")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 10:
        abort(404)
    project_id = int(raw)
    session = db_session()
    with read_transaction(session):
        if rules.membership(session, current_user.id, project_id) is None:
            abort(404)
    flask_session[PAGE_PROJECT_KEY] = project_id
    back = request.form.get("next", "")
    if not back.startswith("/workspace/") or "//" in back or "\\" in back:
        back = url_for("workspace.offers")
    return redirect(back)


def project_label(session: Session, conversation: Conversation | None) -> str | None:
    """The chat's project, named in its header for a person in several projects (None:
    only their personal one, the page as before)."""
    if conversation is None:
        return None
    projects = rules.projects_of(session, current_user.id)
    if len(projects) <= 1:
        return None
    for project, role in projects:
        if project.id == conversation.project_id:
            name = "Personal" if project.personal else project.name
            return name if role != VIEWER else f"{name} (viewer)"
    return None
