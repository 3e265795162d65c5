"""Admin → Models: the models people may pick (list, add, edit, remove, make default), one
partial (`admin/_models.html`, `#models`) every change answers with. The rules are
app/chat/offered_models.py's, as for the command line and the JSON API.

Where the model server lists its models (`GET /v1/models`), the page offers their names
to add. The list is asked for after the page has loaded (its own request, bounded by a
short timeout, its answer kept a minute), so a slow or failing server costs the page
nothing but a quiet note."""

from __future__ import annotations

import logging
import time

from flask import current_app, redirect, render_template, request, url_for
from wtforms import BooleanField, IntegerField, StringField
from wtforms.validators import DataRequired, Length, Optional

from app.chat.model_choice import offered_models
from app.chat.offered_models import (
    LABEL_MAX_CHARS,
    NAME_MAX_CHARS,
    ModelNameTaken,
    ModelRefused,
    ModelSpec,
    UnknownModel,
    add_model,
    change_model,
    listed_models,
    make_default,
    remove_model,
)
from app.llm.errors import ModelError
from app.web.admin import admin_required
from app.web.admin import bp as admin_bp
from app.web.forms import Form
from app.web.identity import db_session

log = logging.getLogger(__name__)
LIST_TIMEOUT_SECONDS = 5.0
LIST_KEPT_SECONDS = 60.0
NUMBERS = ("credits", "window", "thinking_budget")
# Where an app keeps the server's list as last read: (when, names and labels, or the note).
LISTING_KEPT = "loopdesk.model_listing"


class ModelForm(Form):
    name = StringField("Name", validators=[DataRequired(), Length(max=NAME_MAX_CHARS)])
    label = StringField("Label", validators=[DataRequired(), Length(max=LABEL_MAX_CHARS)])
    credits = IntegerField("Credits per run", validators=[Optional()])
    window = IntegerField("Window (tokens)", validators=[Optional()])
    thinking_budget = IntegerField("Thinking budget (tokens)", validators=[Optional()])
    default = BooleanField("Make it the default")

    def spec(self) -> ModelSpec:
        return ModelSpec(
            self.label.data, self.credits.data, self.window.data, self.thinking_budget.data
        )


class ModelEditForm(ModelForm):
    """An edit: the name is the URL's; an empty number goes back to the operator's."""

    name = None
    default = None


def _settings():
    return current_app.extensions["services"].settings


def _render(form: ModelForm | None = None, error: str = "", status: int = 200, edited=""):
    context = {
        "choices": offered_models(db_session(), _settings()),
        "listed": {model.name for model in listed_models(db_session())},
        "model_form": form or ModelForm(formdata=None),
        "models_error": error,
        "edited": edited,
    }
    if request.headers.get("HX-Request"):
        return render_template("admin/_models.html", **context), status
    if request.method == "POST" and status < 400:
        return redirect(url_for("admin.models"), 303)
    return render_template("admin/models.html", **context), status


@admin_bp.get("/models")
@admin_required
def models():
    """The models people may pick for a chat."""
    return _render()


@admin_bp.post("/models")
@admin_required
def add_listed_model():
    """List a model for people to pick."""
    form = ModelForm()
    if not form.validate():
        return _render(form, "Check the fields below: numbers are whole numbers.", 400)
    session = db_session()
    try:
        add_model(
            session,
            form.name.data,
            form.spec(),
            _settings().context_window_tokens,
            form.default.data,
        )
    except ModelRefused as refused:
        session.rollback()
        return _render(form, str(refused), _status(refused))
    session.commit()
    return _render(status=201 if request.headers.get("HX-Request") else 200)


@admin_bp.post("/models/<name>/edit")
@admin_required
def edit_listed_model(name: str):
    """Change a listed model's label and numbers (an empty number: the server's setting)."""
    form = ModelEditForm()
    if not form.validate():
        return _render(error="Numbers are whole numbers.", status=400, edited=name)
    session = db_session()
    cleared = frozenset(n for n in NUMBERS if getattr(form, n).data is None)
    try:
        change_model(session, name, form.spec(), _settings().context_window_tokens, cleared)
    except ModelRefused as refused:
        session.rollback()
        return _render(error=str(refused), status=_status(refused), edited=name)
    session.commit()
    return _render()


@admin_bp.post("/models/<name>/<any(default, remove):action>")
@admin_required
def listed_model_action(name: str, action: str):
    """Make a listed model the default, or take it off the list."""
    session = db_session()
    try:
        if action == "default":
            make_default(session, name)
        else:
            remove_model(session, name)
    except ModelRefused as refused:
        session.rollback()
        return _render(error=str(refused), status=_status(refused))
    session.commit()
    return _render()


def _status(refused: ModelRefused) -> int:
    if isinstance(refused, UnknownModel):
        return 404
    return 409 if isinstance(refused, ModelNameTaken) else 400


@admin_bp.get("/models/server")
@admin_required
def server_models():
    """What the model server lists, to add (asked for by the page once it has loaded)."""
    listed = server_list()
    names = {model.name for model in listed_models(db_session())}
    return render_template(
        "admin/_server_models.html",
        offered=[] if isinstance(listed, str) else [m for m in listed if m[0] not in names],
        note=listed if isinstance(listed, str) else "",
    )


def server_list() -> list[tuple[str, str]] | str:
    """The server's models (id, display name), or a note saying why there are none."""
    services = current_app.extensions["services"]
    if services.settings.uses_demo_model:
        return "No model server is configured: the built-in demo model answers."
    kept = current_app.extensions.get(LISTING_KEPT)
    if kept is not None and time.monotonic() - kept[0] < LIST_KEPT_SECONDS:
        return kept[1]
    services.model.connect_soon()  # the SDK's import, off the serving loop
    try:
        found: list[tuple[str, str]] | str = services.model.list_models(LIST_TIMEOUT_SECONDS)
    except ModelError as error:
        log.info("the model server's list could not be read: %s", error)
        found = "The model server's list of models could not be read just now."
    else:
        if not found:
            found = "The model server lists no models."
    current_app.extensions[LISTING_KEPT] = (time.monotonic(), found)
    return found
