"""Presets on the pages: a person's own (Settings → Presets) and the admin's for everyone
(Admin → Presets). One partial, `settings/_presets.html`, owns `#presets` and shows
either; every action answers it whole (htmx swaps it in place; without htmx the page
comes back). The rules are app/chat/presets.py's, as for the JSON API."""

from __future__ import annotations

from flask import abort, current_app, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from app.chat.model_choice import offered_models
from app.chat.preset_models import (
    INSTRUCTIONS_MAX_CHARS,
    NAME_MAX_CHARS,
    STARTER_MAX_CHARS,
    STARTERS_MAX,
    Preset,
)
from app.chat.presets import (
    PresetFields,
    PresetRefused,
    offered_groups,
    save_preset,
    shared_presets,
    visible_preset,
    visible_presets,
)
from app.web.access import is_htmx
from app.web.admin import admin_required
from app.web.admin import bp as admin_bp
from app.web.identity import db_session
from app.web.settings_page import bp as settings_bp

LIMITS = {
    "name": NAME_MAX_CHARS,
    "instructions": INSTRUCTIONS_MAX_CHARS,
    "starters": STARTERS_MAX,
    "starter": STARTER_MAX_CHARS,
}


def _admin_scope() -> bool:
    return request.blueprint == "admin"


def presets_context(
    editing: Preset | None = None, error: str = "", form: dict | None = None
) -> dict:
    """What `settings/_presets.html` shows: the presets (the person's own and everyone's,
    or, for the admin page, everyone's), the tool groups, and the form's state."""
    services, session = current_app.extensions["services"], db_session()
    admin = _admin_scope()
    presets = shared_presets(session) if admin else visible_presets(session, current_user.id)
    return {
        "presets": presets,
        "tool_groups": offered_groups(services.tools, services.settings),
        "models": offered_models(session, services.settings),
        "admin_scope": admin,
        "editing": editing,
        "preset_error": error,
        "preset_form": form,
        "preset_limits": LIMITS,
    }


def sidebar_presets() -> list[Preset]:
    """The presets a person may start a chat from (the sidebar, the new-chat page)."""
    return visible_presets(db_session(), current_user.id)


# The settings page and the chat pages include partials that ask for these by name.
settings_bp.add_app_template_global(presets_context, "presets_view")
settings_bp.add_app_template_global(sidebar_presets)


def _render(status: int = 200, **context):
    """The partial for htmx; without it, back to the page after a change, or the presets'
    own page (with the form and its error) when something was refused."""
    if not is_htmx() and status < 400:
        target = "admin.presets" if _admin_scope() else "settings.page"
        return redirect(url_for(target, _anchor="presets-heading"), 303)
    template = "settings/_presets.html" if is_htmx() else _page_template()
    return render_template(template, pv=presets_context(**context)), status


def _page_template() -> str:
    return "admin/presets.html" if _admin_scope() else "settings/presets.html"


def _form_fields() -> PresetFields:
    form = request.form
    return PresetFields(
        name=form.get("name", ""),
        instructions=form.get("instructions", ""),
        model=form.get("model", ""),
        tool_groups=form.getlist("tool_groups"),
        starters=form.get("starters", "").splitlines(),
    )


def _save(preset: Preset):
    services, session = current_app.extensions["services"], db_session()
    new = preset.id is None
    try:
        save_preset(session, services.settings, services.tools, preset, _form_fields())
    except PresetRefused as refused:
        session.rollback()
        editing = None if new else preset
        form = {**request.form.to_dict(), "tool_groups": request.form.getlist("tool_groups")}
        return _render(400, editing=editing, error=str(refused), form=form)
    session.commit()
    return _render(201 if new else 200)


def _changeable(preset_id: int) -> Preset:
    """A preset this page changes: the person's own (Settings) or everyone's (Admin);
    404 for any other."""
    preset = visible_preset(db_session(), preset_id, current_user.id)
    if preset is None or preset.shared != _admin_scope():
        abort(404)
    return preset


def _edit(preset_id: int):
    return _render(editing=_changeable(preset_id)) if is_htmx() else _edit_page(preset_id)


def _edit_page(preset_id: int):
    preset = _changeable(preset_id)
    return render_template(_page_template(), pv=presets_context(editing=preset))


def _delete(preset_id: int):
    session = db_session()
    session.delete(_changeable(preset_id))
    session.commit()
    return _render()


# -- a person's own (Settings) ----------------------------------------------------------------


@settings_bp.get("/presets")
@login_required
def own_presets():
    """One's presets on a page of their own (the settings page shows them too)."""
    return render_template("settings/presets.html", pv=presets_context())


@settings_bp.post("/presets")
@login_required
def add_preset():
    """Save a preset of one's own."""
    return _save(Preset(user_id=current_user.id))


@settings_bp.get("/presets/<int:preset_id>/edit")
@login_required
def edit_preset(preset_id: int):
    """The presets with one of one's own open for editing."""
    return _edit(preset_id)


@settings_bp.post("/presets/<int:preset_id>")
@login_required
def save_own_preset(preset_id: int):
    """Save changes to a preset of one's own."""
    return _save(_changeable(preset_id))


@settings_bp.post("/presets/<int:preset_id>/delete")
@login_required
def delete_own_preset(preset_id: int):
    """Delete a preset of one's own (its chats go on without it)."""
    return _delete(preset_id)


# -- everyone's (Admin) -----------------------------------------------------------------------


@admin_bp.get("/presets")
@admin_required
def presets():
    """The presets offered to everyone."""
    return render_template("admin/presets.html", pv=presets_context())


@admin_bp.post("/presets")
@admin_required
def add_shared_preset():
    """Save a preset for everyone."""
    return _save(Preset(user_id=None))


@admin_bp.get("/presets/<int:preset_id>/edit")
@admin_required
def edit_shared_preset(preset_id: int):
    """Everyone's presets with one open for editing."""
    return _edit(preset_id)


@admin_bp.post("/presets/<int:preset_id>")
@admin_required
def save_shared_preset(preset_id: int):
    """Save changes to a preset for everyone."""
    return _save(_changeable(preset_id))


@admin_bp.post("/presets/<int:preset_id>/delete")
@admin_required
def delete_shared_preset(preset_id: int):
    """Delete a preset for everyone (chats started from it go on without it)."""
    return _delete(preset_id)
