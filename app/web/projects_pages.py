"""Project pages: an invitation's accept link (the owner copies it from the API's answer
or the project's members; mailing it is app/web's mailer's, later)."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask_login import current_user, login_required
from sqlalchemy import select

from app.accounts import projects as rules
from app.accounts.models import User
from app.accounts.project_models import Project, ProjectInvitation
from app.db import read_transaction, utcnow
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
