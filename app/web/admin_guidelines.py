"""The admin area's shared guidelines: the rules every agent follows, edited in place, with
a preview of an agent's whole system prompt and the history of changes. Routes on the
admin blueprint (app/web/admin.py)."""

from __future__ import annotations

from flask import abort, current_app, make_response, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy import select
from wtforms import TextAreaField
from wtforms.validators import DataRequired, Length

from app.accounts.models import User
from app.agents import guidelines as rules
from app.agents.catalog import AgentDefinition
from app.agents.models import RULE_MAX_CHARS, Guideline
from app.agents.runner import agent_system_prompt
from app.web.access import is_htmx
from app.web.admin import admin_required, bp
from app.web.forms import Form
from app.web.identity import db_session

CHANGED_EVENT = "guidelines-changed"


def _one_line(value):
    return " ".join(value.split()) if isinstance(value, str) else value


class GuidelineForm(Form):
    text = TextAreaField(
        "Rule",
        filters=[_one_line],
        validators=[
            DataRequired(message="Write the rule."),
            Length(max=RULE_MAX_CHARS, message=f"Keep a rule to {RULE_MAX_CHARS} characters."),
        ],
    )


def _guideline_or_404(guideline_id: int) -> Guideline:
    guideline = db_session().get(Guideline, guideline_id)
    if guideline is None:
        abort(404)
    return guideline


def _agents() -> list[AgentDefinition]:
    return list(current_app.extensions["services"].agents)


def _preview_agent(slug: str | None) -> AgentDefinition:
    agents = _agents()
    if not agents:
        abort(404)
    if not slug:
        return agents[0]
    agent = next((a for a in agents if a.slug == slug), None)
    if agent is None:
        abort(404)
    return agent


def _history() -> list[dict]:
    session = db_session()
    changes = rules.recent_changes(session)
    ids = {c.user_id for c in changes if c.user_id is not None}
    emails: dict[int | None, str] = dict(
        session.execute(select(User.id, User.email).where(User.id.in_(ids))).all()
    )
    return [{"change": c, "who": emails.get(c.user_id)} for c in changes]


def _list_context(form: GuidelineForm | None = None, editing: dict | None = None) -> dict:
    return {
        "guidelines": rules.ordered_guidelines(db_session()),
        "form": form or GuidelineForm(formdata=None),
        "editing": editing or {},
    }


def _rule_context(guideline: Guideline) -> dict:
    ordered = rules.ordered_guidelines(db_session())
    ids = [g.id for g in ordered]
    return {"rule": guideline, "first": ids[0] == guideline.id, "last": ids[-1] == guideline.id}


def _page(status: int = 200, **list_context):
    session = db_session()
    rules.ensure_seeded(session)
    session.commit()
    agent = _preview_agent(request.args.get("agent"))
    return render_template(
        "admin/guidelines.html",
        agents=_agents(),
        agent=agent,
        prompt=agent_system_prompt(agent, session),
        history=_history(),
        **_list_context(**list_context),
    ), status


def _changed(template: str, **context):
    """After a change: the fragment for htmx (which then refreshes the preview and the
    history), or back to the page for a plain form post."""
    if not is_htmx():
        return redirect(url_for("admin.guidelines"))
    response = make_response(render_template(template, **context))
    response.headers["HX-Trigger"] = CHANGED_EVENT
    return response


@bp.get("/guidelines")
@admin_required
def guidelines():
    """The shared guidelines every agent follows, in order."""
    return _page()


@bp.post("/guidelines")
@admin_required
def guideline_add():
    """Add a guideline at the end."""
    form = GuidelineForm()
    session = db_session()
    if form.validate_on_submit():
        try:
            rules.add_rule(session, form.text.data, current_user.id)
        except rules.GuidelineError as error:
            session.rollback()
            form.text.errors.append(str(error))
        else:
            session.commit()
            return _changed("admin/_guideline_list.html", **_list_context())
    if not is_htmx():
        return _page(400, form=form)
    return render_template("admin/_guideline_list.html", **_list_context(form=form)), 400


@bp.get("/guidelines/<int:guideline_id>")
@admin_required
def guideline(guideline_id: int):
    """One guideline in the list."""
    return render_template(
        "admin/_guideline.html", **_rule_context(_guideline_or_404(guideline_id))
    )


@bp.route("/guidelines/<int:guideline_id>/edit", methods=["GET", "POST"])
@admin_required
def guideline_edit(guideline_id: int):
    """Edit a guideline's text."""
    guideline = _guideline_or_404(guideline_id)
    if request.method == "GET":
        form = GuidelineForm(formdata=None, data={"text": guideline.text})
    else:
        form = GuidelineForm()
        if form.validate_on_submit():
            session = db_session()
            rules.edit_rule(session, guideline, form.text.data, current_user.id)
            session.commit()
            return _changed("admin/_guideline.html", **_rule_context(guideline))
    editing = {guideline.id: form}
    status = 400 if form.errors else 200
    if not is_htmx():
        return _page(status, editing=editing)
    context = {**_rule_context(guideline), "editing": editing}
    return render_template("admin/_guideline.html", **context), status


@bp.post("/guidelines/<int:guideline_id>/<any(enable, disable):state>")
@admin_required
def guideline_enable(guideline_id: int, state: str):
    """Turn a guideline on or off."""
    guideline = _guideline_or_404(guideline_id)
    session = db_session()
    rules.set_enabled(session, guideline, state == "enable", current_user.id)
    session.commit()
    return _changed("admin/_guideline.html", **_rule_context(guideline))


@bp.post("/guidelines/<int:guideline_id>/move/<any(up, down):direction>")
@admin_required
def guideline_move(guideline_id: int, direction: str):
    """Move a guideline up or down."""
    guideline = _guideline_or_404(guideline_id)
    session = db_session()
    rules.move_rule(session, guideline, -1 if direction == "up" else 1, current_user.id)
    session.commit()
    return _changed("admin/_guideline_list.html", **_list_context())


@bp.post("/guidelines/<int:guideline_id>/delete")
@admin_required
def guideline_delete(guideline_id: int):
    """Delete a guideline (kept in the history)."""
    guideline = _guideline_or_404(guideline_id)
    session = db_session()
    rules.delete_rule(session, guideline, current_user.id)
    session.commit()
    return _changed("admin/_guideline_list.html", **_list_context())


@bp.get("/guidelines/preview")
@admin_required
def guideline_preview():
    """An agent's final system prompt with the guidelines as they are now."""
    session = db_session()
    agent = _preview_agent(request.args.get("agent"))
    prompt = agent_system_prompt(agent, session)
    session.commit()  # a first read seeds the rules
    return render_template("admin/_prompt_preview.html", agent=agent, prompt=prompt)


@bp.get("/guidelines/history")
@admin_required
def guideline_history():
    """Every change to the guidelines, newest first."""
    return render_template("admin/_guideline_history.html", history=_history())
