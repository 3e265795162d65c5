"""The admin area's projects: everyone's, each with its members, chats and usage, and
removing one (not a personal project: that goes with its person). Routes on the admin
blueprint (app/web/admin.py); removing is the owners' own deletion
(app/web/project_removal.py)."""

from __future__ import annotations

from flask import abort, flash, redirect, render_template, request, url_for
from sqlalchemy import func, select
from wtforms import StringField
from wtforms.validators import DataRequired, Length

from app.accounts import projects as rules
from app.accounts.models import User
from app.accounts.project_models import Project
from app.accounts.project_overview import all_projects
from app.billing.quota import month_of
from app.billing.usage import project_history, project_totals
from app.chat.models import Conversation
from app.web import project_removal as removal
from app.web.admin import admin_required, bp
from app.web.forms import Form
from app.web.identity import db_session

RECENT_CHATS = 30


def _project_or_404(project_id: int) -> Project:
    project = db_session().get(Project, project_id)
    if project is None:
        abort(404)
    return project


def _chat_counts() -> dict[int, int]:
    counts = db_session().execute(
        select(Conversation.project_id, func.count()).group_by(Conversation.project_id)
    )
    return {project_id: int(count) for project_id, count in counts}


def _chats_in(project_id: int) -> int:
    return db_session().scalar(  # type: ignore[return-value]  # a count is never NULL
        select(func.count()).select_from(Conversation).where(Conversation.project_id == project_id)
    )


def _personal_email(project: Project) -> str | None:
    if project.personal_user_id is None:
        return None
    person = db_session().get(User, project.personal_user_id)
    return person.email if person else None


@bp.get("/projects")
@admin_required
def projects():
    """Every project with its owners, members, chats and this month's credits."""
    session = db_session()
    current = month_of()
    return render_template(
        "admin/projects.html",
        lines=all_projects(session),
        chats=_chat_counts(),
        credits=project_totals(session, current),
        current=current,
    )


@bp.get("/projects/<int:project_id>")
@admin_required
def project(project_id: int):
    """One project: its members and their roles, its recent chats and its usage by month."""
    found = _project_or_404(project_id)
    session = db_session()
    recent = session.execute(
        select(Conversation, User.email)
        .join(User, User.id == Conversation.user_id)
        .where(Conversation.project_id == project_id)
        .order_by(Conversation.updated_at.desc(), Conversation.id.desc())
        .limit(RECENT_CHATS)
    ).all()
    return render_template(
        "admin/project.html",
        project=found,
        personal_email=_personal_email(found),
        members=rules.members_of(session, project_id),
        chats=_chats_in(project_id),
        recent=recent,
        history=project_history(session, project_id),
        current=month_of(),
    )


class RemoveProjectForm(Form):
    """Typing the project's name confirms which project goes (there is no undo)."""

    name = StringField(
        "Type the project's name to confirm",
        validators=[DataRequired(), Length(max=rules.NAME_MAX)],
    )


def _remove_page(project: Project, form: RemoveProjectForm, status: int = 200):
    return render_template(
        "admin/remove_project.html",
        project=project,
        form=form,
        chats=_chats_in(project.id),
        members=len(rules.members_of(db_session(), project.id)),
    ), status


@bp.route("/projects/<int:project_id>/delete", methods=["GET", "POST"])
@admin_required
def delete_project(project_id: int):
    """Remove a project with its workspace and chats: the confirmation page (GET) and the
    removal (POST). Not a personal project: that goes with its person."""
    found = _project_or_404(project_id)
    if found.personal:
        flash("A personal project goes only with its person (People, Delete).")
        return redirect(url_for("admin.project", project_id=found.id))
    if request.method == "GET":
        return _remove_page(found, RemoveProjectForm(formdata=None))
    form = RemoveProjectForm()
    if not form.validate():
        return _remove_page(found, form, 400)
    if form.name.data.strip() != found.name:
        form.name.errors.append("That is not the project's name: nothing was removed.")
        return _remove_page(found, form, 400)
    name, chats = found.name, _chats_in(found.id)
    removal.delete_project(db_session(), found.id)
    flash(f"Removed the project {name} and its {chats} chat{'' if chats == 1 else 's'}.")
    return redirect(url_for("admin.projects"))
