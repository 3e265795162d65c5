"""The settings page: personal instructions, remembered facts, import from text, the memory
history, API tokens and the account's password.

Every memory write goes through app.web.memory_writes (over app.memory.store), committed
whole or not at all. The
memory sections are partials shared with the admin's view of someone's memory
(app.web.admin), which passes its own URLs, source "admin" and itself as the actor."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    abort,
    flash,
    g,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required
from sqlalchemy import select

from app.accounts.models import ApiToken, User, end_sessions
from app.chat.provenance import untrusted_facts
from app.db import utcnow
from app.mcp.sign_in import views_for
from app.memory.models import MemoryChange, UserMemory
from app.memory.store import (
    MAX_FACT_CHARS,
    MAX_FACTS,
    MAX_INPUT_CHARS,
    MAX_INSTRUCTIONS_CHARS,
    MemoryRefused,
    Operation,
    Outcome,
    Source,
    read_memory,
)
from app.web.access import is_htmx, owned_or_404
from app.web.errors import ApiError
from app.web.extensions import limiter, model_work_rate_limit
from app.web.forms import (
    ConfirmForm,
    FactEditForm,
    FactForm,
    ImportForm,
    InstructionsForm,
    McpServerForm,
    PasswordChangeForm,
    TokenForm,
)
from app.web.identity import db_session
from app.web.memory_writes import apply_committed, reconcile_committed
from app.web.offload import off_the_loop
from app.web.session import end_this_session, keep_this_session
from app.web.socket_access import announce_sessions_ended, announce_token_revoked

bp = Blueprint("settings", __name__, url_prefix="/settings")

HISTORY_LIMIT = 50


# -- memory sections, shared with the admin's view -------------------------------------


@dataclass(frozen=True)
class MemoryTarget:
    """Whose memory a request edits, how the change is recorded, and where its forms post."""

    user_id: int
    source: Source
    actor_id: int
    urls: dict[str, str]
    page_url: str
    where: str = "in settings"  # for the reasons in the history: "Added in settings."

    @property
    def can_import(self) -> bool:
        return "import" in self.urls


def own_memory() -> MemoryTarget:
    return MemoryTarget(
        user_id=current_user.id,
        source="settings",
        actor_id=current_user.id,
        urls={
            "instructions": url_for("settings.save_instructions"),
            "add": url_for("settings.add_fact"),
            "forget": url_for("settings.forget_fact"),
            "edit": url_for("settings.edit_fact"),
            "import": url_for("settings.import_text"),
            "history": url_for("settings.history"),
        },
        page_url=url_for("settings.page"),
    )


def memory_history(user_id: int) -> list[dict]:
    """The last changes, newest first, with the email of whoever made each one."""
    session = db_session()
    changes = list(
        session.scalars(
            select(MemoryChange)
            .where(MemoryChange.user_id == user_id)
            .order_by(MemoryChange.created_at.desc(), MemoryChange.id.desc())
            .limit(HISTORY_LIMIT)
        )
    )
    ids = {c.actor_id for c in changes if c.actor_id is not None}
    emails: dict[int | None, str] = dict(
        session.execute(select(User.id, User.email).where(User.id.in_(ids))).all()
    )
    return [{"change": c, "who": emails.get(c.actor_id)} for c in changes]


def memory_context(target: MemoryTarget, **overrides) -> dict:
    instructions, facts = read_memory(db_session(), target.user_id)
    context = {
        "target": target,
        "urls": target.urls,
        "instructions": instructions,
        "facts": facts,
        # Facts saved from a conversation that had read untrusted content (badged).
        "untrusted_facts": untrusted_facts(db_session().get(UserMemory, target.user_id)),
        "history": memory_history(target.user_id),
        "fact_form": FactForm(formdata=None),
        "import_form": ImportForm(formdata=None),
        "max_instructions": MAX_INSTRUCTIONS_CHARS,
        "max_facts": MAX_FACTS,
        "max_fact_chars": MAX_FACT_CHARS,
        "max_import_chars": MAX_INPUT_CHARS,
        "instructions_error": None,
        "instructions_saved": False,
        "edit_error": None,
        "import_result": None,
    }
    context.update(overrides)
    return context


def memory_response(
    target: MemoryTarget,
    partial: str,
    status: int = 200,
    page=None,
    with_facts: bool = False,
    **context,
):
    """A memory section after a post. For htmx: the section, plus the history out of band
    after a change (and the facts too, `with_facts`, after an import). Without htmx: back
    to the page after a change, or the whole page with the error."""
    changed = status < 400
    if not is_htmx():
        if changed:
            return redirect(target.page_url)
        return page(status, **context)
    full = memory_context(target, **context)
    html = render_template(partial, **full)
    if changed:
        if with_facts:
            html += render_template("settings/_facts.html", **full, swap_oob=True)
        html += render_template("settings/_history.html", **full, swap_oob=True)
    return make_response(html, status)


def _apply(target: MemoryTarget, operations: list[Operation], **kwargs) -> Outcome:
    """Apply and commit, or roll back and raise MemoryRefused: nothing half-saved."""
    return apply_committed(
        target.user_id, operations, source=target.source, actor_id=target.actor_id, **kwargs
    )


def save_instructions_for(target: MemoryTarget, page):
    form = InstructionsForm()
    text = form.instructions.data or ""
    error = None
    if not form.validate():  # only the CSRF token can fail here
        error = "The form expired: reload the page and try again."
    else:
        try:
            _apply(target, [], instructions=text)
        except MemoryRefused as refusal:
            error = str(refusal)
    if error is not None:
        return memory_response(
            target,
            "settings/_instructions.html",
            400,
            page,
            instructions=text,
            instructions_error=error,
        )
    return memory_response(
        target, "settings/_instructions.html", page=page, instructions_saved=True
    )


def add_fact_for(target: MemoryTarget, page):
    form = FactForm()
    if form.validate():
        try:
            _apply(target, [Operation("add", form.fact.data, reason=f"Added {target.where}.")])
        except MemoryRefused as refusal:
            form.fact.errors.append(str(refusal))
        else:
            return memory_response(target, "settings/_facts.html", page=page)
    return memory_response(target, "settings/_facts.html", 400, page, fact_form=form)


def forget_fact_for(target: MemoryTarget, page):
    form = FactForm()  # the same one field: the fact, verbatim
    if not form.validate():
        return memory_response(target, "settings/_facts.html", 400, page)
    _apply(target, [Operation("forget", form.fact.data, reason=f"Forgotten {target.where}.")])
    return memory_response(target, "settings/_facts.html", page=page)


def edit_fact_for(target: MemoryTarget, page):
    form = FactEditForm()
    old = form.fact.data or ""
    if form.validate():
        if form.new_fact.data == old:
            return memory_response(target, "settings/_facts.html", page=page)
        operation = Operation("replace", old, form.new_fact.data, reason=f"Edited {target.where}.")
        try:
            _apply(target, [operation])
        except MemoryRefused as refusal:
            form.new_fact.errors.append(str(refusal))
        else:
            return memory_response(target, "settings/_facts.html", page=page)
    errors = form.new_fact.errors or form.fact.errors or ["That edit could not be saved."]
    edit_error = {"fact": old, "value": form.new_fact.data or "", "message": errors[0]}
    return memory_response(target, "settings/_facts.html", 400, page, edit_error=edit_error)


def import_text_for(target: MemoryTarget, page):
    form = ImportForm()
    if form.validate():
        try:
            outcome = reconcile_committed(
                target.user_id, form.text.data, source="import", actor_id=target.actor_id
            )
        except MemoryRefused as refusal:
            form.text.errors.append(str(refusal))
        else:
            result = {
                "changes": len(outcome.changes),
                "used_fallback": outcome.used_fallback,
            }
            return memory_response(
                target,
                "settings/_import.html",
                page=page,
                with_facts=True,
                import_result=result,
            )
    return memory_response(target, "settings/_import.html", 400, page, import_form=form)


# -- the page -----------------------------------------------------------------------------


def _tokens() -> list[ApiToken]:
    query = (
        select(ApiToken)
        .where(ApiToken.user_id == current_user.id)
        .order_by(ApiToken.created_at.desc(), ApiToken.id.desc())
    )
    return list(db_session().scalars(query))


def _settings_page(status: int = 200, **overrides):
    context = {
        **memory_context(own_memory()),
        "tokens": _tokens(),
        "form": TokenForm(formdata=None),
        "confirm": ConfirmForm(),
        "password_form": PasswordChangeForm(formdata=None),
        "password_changed": False,
        **views_for(db_session(), current_user.id, admin_scope=False),
        "mcp_form": McpServerForm(formdata=None),
        "admin_scope": False,
        "mcp_error": "",
    }
    context.update(overrides)
    return render_template("settings/page.html", **context), status


@bp.get("")
@login_required
def page():
    """The settings page: instructions, facts, import, history, tokens, data, appearance, account."""
    return _settings_page()


@bp.post("/instructions")
@login_required
def save_instructions():
    """Save one's personal instructions."""
    return save_instructions_for(own_memory(), _settings_page)


@bp.post("/facts")
@login_required
def add_fact():
    """Add a fact to one's memory."""
    return add_fact_for(own_memory(), _settings_page)


@bp.post("/facts/forget")
@login_required
def forget_fact():
    """Forget one of one's facts."""
    return forget_fact_for(own_memory(), _settings_page)


@bp.post("/facts/edit")
@login_required
def edit_fact():
    """Correct one of one's facts."""
    return edit_fact_for(own_memory(), _settings_page)


@bp.post("/import")
@login_required
@model_work_rate_limit
def import_text():
    """Learn facts from a pasted text (the fast model picks them out)."""
    return import_text_for(own_memory(), _settings_page)


@bp.get("/history")
@login_required
def history():
    """The last changes to one's memory."""
    return render_template(
        "settings/_history.html",
        history=memory_history(current_user.id),
        untrusted_facts=untrusted_facts(db_session().get(UserMemory, current_user.id)),
        swap_oob=False,
    )


# -- account --------------------------------------------------------------------------------


@bp.post("/password")
@login_required
@limiter.limit("10 per minute")
def change_password():
    """Change one's password (other sessions end; this one stays)."""
    form = PasswordChangeForm()
    session = db_session()
    user = session.get(User, current_user.id)
    if form.validate():
        if not off_the_loop(user.check_password, form.current_password.data):
            form.current_password.errors.append("That is not your current password.")
        else:
            user.set_password(form.new_password.data)
            end_sessions(user)  # a copy of any cookie from before stops working...
            session.commit()
            announce_sessions_ended(user)
            keep_this_session(user)  # ...but this browser stays logged in
            if not is_htmx():
                return redirect(url_for("settings.page") + "#account")
            return render_template(
                "settings/_account.html",
                password_form=PasswordChangeForm(formdata=None),
                password_changed=True,
            )
    if not is_htmx():
        return _settings_page(400, password_form=form)
    return render_template(
        "settings/_account.html", password_form=form, password_changed=False
    ), 400


@bp.post("/sessions/end")
@login_required
def end_sessions_everywhere():
    """Log out everywhere: every session of the account ends, this one included."""
    if not ConfirmForm().validate():
        abort(400)
    session = db_session()
    user = session.get(User, current_user.id)
    end_sessions(user)
    session.commit()
    announce_sessions_ended(user)
    end_this_session()
    flash("You are logged out everywhere.")
    return redirect(url_for("auth.login"))


THEMES = ("system", "light", "dark")


@bp.post("/theme")
@login_required
def set_theme():
    """The colour theme, kept on the account: `theme` is system (follow the browser),
    light or dark. The top bar's toggle posts here with fetch (204); the form in Settings
    posts and comes back."""
    theme = request.form.get("theme", "")
    if theme not in THEMES:
        raise ApiError(400, "Choose a theme: system, light or dark.")
    session = db_session()
    session.get(User, current_user.id).theme = theme
    session.commit()
    if request.headers.get("X-Requested-With") == "fetch" or is_htmx():
        return "", 204
    return redirect(_back_to(request.referrer) or url_for("settings.page"), 303)


def _back_to(referrer: str | None) -> str | None:
    """The page the form was on, if it is one of ours (a path on this host)."""
    if not referrer:
        return None
    parts = urlsplit(referrer)
    if parts.netloc != request.host or not parts.path.startswith("/"):
        return None
    return parts.path + (f"?{parts.query}" if parts.query else "")


# -- tokens ---------------------------------------------------------------------------------


def _session_only() -> None:
    """A token never mints (or revokes) tokens: app.web.scopes refuses it first; this
    says so again where it matters most."""
    if g.get("authenticated_by_bearer"):
        abort(403)


@bp.post("/tokens")
@login_required
def create_token():
    """Make a bearer token with its scopes and expiry (shown once)."""
    _session_only()
    form = TokenForm()
    if not form.validate():
        return render_template(
            "settings/_tokens.html", tokens=_tokens(), form=form, confirm=ConfirmForm()
        ), 400
    session = db_session()
    days = int(form.expires.data) if form.expires.data else None
    expires_at = utcnow() + timedelta(days=days) if days else None
    token, raw = ApiToken.issue(
        session.merge(current_user), form.name.data.strip(), form.scopes(), expires_at
    )
    session.add(token)
    session.commit()
    return render_template(
        "settings/_tokens.html",
        tokens=_tokens(),
        form=TokenForm(formdata=None),
        confirm=ConfirmForm(),
        new_token=raw,
    ), 201


@bp.post("/tokens/<int:token_id>/revoke")
@login_required
def revoke_token(token_id: int):
    """Revoke one of one's tokens."""
    _session_only()
    token = owned_or_404(ApiToken, token_id)
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        db_session().commit()
        announce_token_revoked(token)
    return render_template(
        "settings/_tokens.html",
        tokens=_tokens(),
        form=TokenForm(formdata=None),
        confirm=ConfirmForm(),
    )
