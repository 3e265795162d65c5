"""The admin area: people (and what the assistant remembers about each), run logs, usage
and credit allowances. The shared guidelines' pages are in app/web/admin_guidelines.py, on
this blueprint."""

from __future__ import annotations

from functools import wraps

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required
from sqlalchemy import func, select
from wtforms import IntegerField, StringField
from wtforms.validators import DataRequired, Length, NumberRange, Optional

from app.accounts.models import User
from app.accounts.person_projects import projects_on_deletion
from app.accounts.project_overview import projects_by_person
from app.accounts.service import AccountError, create_user
from app.billing.meter import run_credits
from app.billing.quota import month_of
from app.billing.usage import (
    MONTH,
    person_history,
    usage_by_person,
    usage_by_project,
    usage_months,
)
from app.chat.feedback import describe_feedback
from app.chat.model_choice import default_of, offered_models
from app.chat.models import Conversation, Run
from app.chat.person_deletion import delete_person, what_deleting_removes
from app.chat.run_log import describe, load_reports
from app.web.admin_feedback import feedback_listing
from app.web.forms import Form, UserCreateForm
from app.web.identity import db_session
from app.web.input_gate import id_from_text
from app.web.mailing import reset_link
from app.web.settings_page import (
    MemoryTarget,
    add_fact_for,
    edit_fact_for,
    forget_fact_for,
    memory_context,
    save_instructions_for,
)
from app.web.socket_access import announce_person_gone

bp = Blueprint("admin", __name__, url_prefix="/admin")


def admin_required(view):
    @wraps(view)
    @login_required
    def wrapper(*args, **kwargs):
        if not current_user.is_admin:
            abort(403)
        return view(*args, **kwargs)

    return wrapper


def _people() -> dict:
    """The People page's people, each with their projects."""
    session = db_session()
    return {
        "users": list(session.scalars(select(User).order_by(User.created_at, User.id))),
        "projects": projects_by_person(session),
    }


@bp.get("/")
@admin_required
def home():
    """The admin area's front page: the people."""
    return redirect(url_for("admin.users"))


@bp.route("/users", methods=["GET", "POST"])
@admin_required
def users():
    """The people with accounts (GET), and a new account (POST)."""
    form = UserCreateForm()
    if form.validate_on_submit():
        session = db_session()
        try:
            user = create_user(
                session, form.email.data, form.password.data, is_admin=form.is_admin.data
            )
        except AccountError as error:
            session.rollback()
            form.email.errors.append(str(error))
        else:
            session.commit()
            flash(f"Created {user.email}.")
            return redirect(url_for("admin.users"))
    status = 400 if form.errors else 200
    return render_template("admin/users.html", **_people(), form=form), status


@bp.post("/users/<int:user_id>/reset-link")
@admin_required
def reset_link_for(user_id: int):
    """A link that sets a new password for the person, shown once on the People page for
    the admin to hand over (no mail is sent; the same rules as a mailed one)."""
    person = _person_or_404(user_id)
    link = reset_link(person)
    db_session().commit()
    return render_template(
        "admin/users.html",
        **_people(),
        form=UserCreateForm(formdata=None),
        reset_link=link,
        reset_person=person,
    )


# -- deleting someone --------------------------------------------------------------------------


class DeletePersonForm(Form):
    """Typing the email confirms which person goes (there is no undo)."""

    email = StringField("Type their email to confirm", validators=[DataRequired(), Length(max=254)])


def _delete_page(person: User, form: DeletePersonForm, status: int = 200):
    session = db_session()
    return render_template(
        "admin/delete_person.html",
        person=person,
        form=form,
        chats=what_deleting_removes(session, person.id),
        projects=projects_on_deletion(session, person.id),
    ), status


@bp.route("/users/<int:user_id>/delete", methods=["GET", "POST"])
@admin_required
def delete_user(user_id: int):
    """Delete a person: the confirmation page (GET) and the deletion (POST)."""
    person = _person_or_404(user_id)
    if person.id == current_user.id:
        flash("You cannot delete your own account here.")
        return redirect(url_for("admin.users"))
    form = DeletePersonForm()
    if request.method == "GET":
        return _delete_page(person, DeletePersonForm(formdata=None))
    if not form.validate():
        return _delete_page(person, form, 400)
    if User.normalize_email(form.email.data) != person.email:
        form.email.errors.append("That is not their email: nothing was deleted.")
        return _delete_page(person, form, 400)
    session = db_session()
    person_id = person.id
    deleted = delete_person(session, person)
    session.commit()
    announce_person_gone(person_id)
    for run_id in deleted.active_run_ids:  # their runs stop at their next event
        current_app.extensions["services"].cancellations.add(run_id)
    for handover in deleted.projects.passed:
        flash(f"{handover.project_name} now belongs to {handover.heir_email}.")
    flash(f"Deleted {deleted.email} and {deleted.conversations} chats.")
    return redirect(url_for("admin.users"))


# -- someone's memory ------------------------------------------------------------------------


def _person_or_404(user_id: int) -> User:
    person = db_session().get(User, user_id)
    if person is None:
        abort(404)
    return person


def _memory_target(person: User) -> MemoryTarget:
    """The person's memory, edited by the admin: recorded as source "admin" with the admin
    as the actor. No import here: that reads the person's own text."""
    return MemoryTarget(
        user_id=person.id,
        source="admin",
        actor_id=current_user.id,
        urls={
            "instructions": url_for("admin.memory_instructions", user_id=person.id),
            "add": url_for("admin.memory_add_fact", user_id=person.id),
            "forget": url_for("admin.memory_forget_fact", user_id=person.id),
            "edit": url_for("admin.memory_edit_fact", user_id=person.id),
        },
        page_url=url_for("admin.memory", user_id=person.id),
        where="by an admin",
    )


def _memory_page(person: User):
    def page(status: int = 200, **overrides):
        context = memory_context(_memory_target(person), **overrides)
        return render_template("admin/memory.html", person=person, **context), status

    return page


@bp.get("/users/<int:user_id>/memory")
@admin_required
def memory(user_id: int):
    """A person's memory: instructions, facts and their history."""
    return _memory_page(_person_or_404(user_id))()


@bp.post("/users/<int:user_id>/memory/instructions")
@admin_required
def memory_instructions(user_id: int):
    """Save a person's instructions."""
    person = _person_or_404(user_id)
    return save_instructions_for(_memory_target(person), _memory_page(person))


@bp.post("/users/<int:user_id>/memory/facts")
@admin_required
def memory_add_fact(user_id: int):
    """Add a fact to a person's memory."""
    person = _person_or_404(user_id)
    return add_fact_for(_memory_target(person), _memory_page(person))


@bp.post("/users/<int:user_id>/memory/facts/forget")
@admin_required
def memory_forget_fact(user_id: int):
    """Forget one of a person's facts."""
    person = _person_or_404(user_id)
    return forget_fact_for(_memory_target(person), _memory_page(person))


@bp.post("/users/<int:user_id>/memory/facts/edit")
@admin_required
def memory_edit_fact(user_id: int):
    """Correct one of a person's facts."""
    person = _person_or_404(user_id)
    return edit_fact_for(_memory_target(person), _memory_page(person))


# -- run logs ------------------------------------------------------------------------------

RECENT_CONVERSATIONS = 30


def _conversations(user_id: int | None) -> list[dict]:
    """The most recently active conversations (of one person, or of everyone), with their
    owner and number of runs."""
    session = db_session()
    run_counts = (
        select(Run.conversation_id, func.count().label("runs"))
        .group_by(Run.conversation_id)
        .subquery()
    )
    query = (
        select(Conversation, User.email, func.coalesce(run_counts.c.runs, 0))
        .join(User, User.id == Conversation.user_id)
        .outerjoin(run_counts, run_counts.c.conversation_id == Conversation.id)
        .order_by(Conversation.updated_at.desc(), Conversation.id.desc())
        .limit(RECENT_CONVERSATIONS)
    )
    if user_id is not None:
        query = query.where(Conversation.user_id == user_id)
    return [
        {"conversation": c, "owner": email, "runs": runs}
        for c, email, runs in session.execute(query)
    ]


@bp.get("/runs")
@admin_required
def run_logs():
    """Find a conversation's run logs: by its id, or from the recent conversations."""
    wanted = request.args.get("conversation", "").strip()
    problem = None
    status = 200
    if wanted:
        if not (wanted.isascii() and wanted.isdigit()):
            problem, status = "A conversation id is a number (it is in the chat's address).", 400
        elif id_from_text(wanted) is None or db_session().get(Conversation, int(wanted)) is None:
            problem, status = f"There is no conversation {wanted}.", 404
        else:
            return redirect(url_for("admin.conversation_runs", conversation_id=int(wanted)))
    person = None
    if "user" in request.args:
        person = _person_or_404(id_from_text(request.args.get("user")) or 0)
    feedback = feedback_listing(request.args)
    return render_template(
        "admin/run_logs.html",
        conversations=_conversations(person.id if person else None),
        person=person,
        wanted=wanted,
        problem=problem,
        feedback=feedback,
    ), 400 if feedback.problem and status == 200 else status


@bp.get("/conversations/<int:conversation_id>/runs")
@bp.get("/conversations/<int:conversation_id>/runs/<int:run_id>")
@admin_required
def conversation_runs(conversation_id: int, run_id: int | None = None):
    """What `flask chat-logs CONVERSATION_ID [RUN_ID]` prints, as a page."""
    session = db_session()
    conversation = session.get(Conversation, conversation_id)
    if conversation is None:
        abort(404)
    if run_id is not None:
        run = session.get(Run, run_id)
        if run is None or run.conversation_id != conversation_id:
            abort(404)
    return render_template(
        "admin/conversation_runs.html",
        conversation=conversation,
        owner=session.get(User, conversation.user_id),
        reports=load_reports(session, conversation_id, run_id),
        run_id=run_id,
        describe=describe,
        describe_feedback=describe_feedback,
    )


# -- usage and credit allowances ------------------------------------------------------------

MAX_ALLOWANCE = 10_000_000


class AllowanceForm(Form):
    monthly_credits = IntegerField(
        "Monthly credits",
        description="Leave blank for unlimited.",
        validators=[
            Optional(),
            NumberRange(
                min=0, max=MAX_ALLOWANCE, message=f"Use a whole number from 0 to {MAX_ALLOWANCE:,}."
            ),
        ],
    )


def _pricing() -> dict:
    """What a reply costs, as the usage pages explain it."""
    services = current_app.extensions["services"]
    choices = offered_models(db_session(), services.settings)
    default = default_of(choices)
    return {
        "model": default.name,
        "demo": services.settings.uses_demo_model,
        "per_run": run_credits(services.settings, 0, default),
        "several": len(choices) > 1,  # each model's credits: Admin → Models
        "billable": sorted(tool.name for tool in services.tools.all() if tool.billable),
    }


@bp.get("/usage")
@admin_required
def usage():
    """Everyone's usage in one month (the current one unless `month` names another), by
    person and by project."""
    current = month_of()
    month = request.args.get("month") or current
    if not MONTH.match(month):
        abort(400, "A month looks like 2026-11.")
    session = db_session()
    return render_template(
        "admin/usage.html",
        month=month,
        current=current,
        months=usage_months(session, current),
        lines=usage_by_person(session, month),
        projects=usage_by_project(session, month),
        pricing=_pricing(),
    )


def _person_usage_page(person: User, form: AllowanceForm, status: int = 200):
    current = month_of()
    history = person_history(db_session(), person.id)
    this_month = next((usage for month, usage in history if month == current), None)
    return render_template(
        "admin/usage_person.html",
        person=person,
        form=form,
        history=history,
        current=current,
        this_month=this_month,
        pricing=_pricing(),
    ), status


@bp.get("/users/<int:user_id>/usage")
@admin_required
def person_usage(user_id: int):
    """One person's usage: runs, credits and their allowance."""
    person = _person_or_404(user_id)
    form = AllowanceForm(formdata=None, data={"monthly_credits": person.monthly_credits})
    return _person_usage_page(person, form)


@bp.post("/users/<int:user_id>/allowance")
@admin_required
def set_allowance(user_id: int):
    """Set (or clear, with a blank field) a person's monthly credit allowance. It counts
    from their next message on; a run already under way finishes."""
    person = _person_or_404(user_id)
    form = AllowanceForm()
    if not form.validate_on_submit():
        return _person_usage_page(person, form, 400)
    person.monthly_credits = form.monthly_credits.data
    db_session().commit()
    if person.monthly_credits is None:
        flash(f"{person.email} now has unlimited credits.")
    else:
        flash(f"{person.email} now has {person.monthly_credits:,} credits a month.")
    return redirect(url_for("admin.person_usage", user_id=person.id))
