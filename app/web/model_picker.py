"""The chat header's model picker (templates/chat/_model_picker.html, `#model-picker`) and
the one way a chat's model is chosen, for the page (`PATCH /chats/<id>/model`) and the JSON
API (`PATCH /api/chats/<id> {"model": NAME}`). What a chat answers with is
app/chat/model_choice.py's to say."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app, redirect, render_template, request, url_for
from flask_login import login_required

from app.chat.model_choice import (
    ChosenModel,
    default_of,
    fallback_notice,
    model_named,
    offered_models,
)
from app.chat.models import Conversation
from app.web.access import owned_or_404
from app.web.chat import bp
from app.web.chat_actions import offered_model_name, organize_conversation
from app.web.context_gauge import gauge_of
from app.web.errors import ApiError
from app.web.identity import db_session


@dataclass(frozen=True)
class Picker:
    choices: list[ChosenModel]
    current: ChosenModel  # what the chat answers with
    notice: str | None  # its pick is no longer offered

    @property
    def shown(self) -> bool:
        """Shown while there is a choice to make, or news of one gone."""
        return len(self.choices) > 1 or self.notice is not None


def _choices() -> list[ChosenModel]:
    return offered_models(db_session(), current_app.extensions["services"].settings)


def choose_chat_model(conversation: Conversation, name: str | None) -> None:
    """The chat answers with `name` from its next request on (None: the default); the
    caller commits. 400 `UNKNOWN_MODEL` for a name not offered."""
    conversation.model = offered_model_name(name)


@bp.app_template_global()
def model_picker(conversation: Conversation) -> Picker:
    choices = _choices()
    current = model_named(choices, conversation.model) or default_of(choices)
    return Picker(choices, current, fallback_notice(choices, conversation.model))


@bp.app_template_global()
def draft_model_picker(preset_model: str | None) -> Picker:
    """A new chat's picker: its preset's model (or the default) until the person picks."""
    choices = _choices()
    return Picker(choices, model_named(choices, preset_model) or default_of(choices), None)


@bp.route("/chats/<int:conversation_id>/model", methods=["PATCH", "POST"])
@login_required
def choose_model(conversation_id: int):
    """Pick the chat's model: the picker again (htmx), or back to the chat (a plain form)."""
    conversation = owned_or_404(Conversation, conversation_id)
    name = (request.form.get("model") or "").strip() or None
    status, error = 200, None
    try:
        choose_chat_model(conversation, name)
    except ApiError as unknown:
        db_session().rollback()
        error, status = unknown.message, 400
    else:
        organize_conversation(conversation, {})  # commits; every tab's list follows
    if request.method == "POST" and not request.headers.get("HX-Request"):
        return redirect(url_for("chat.show", conversation_id=conversation_id), 303)
    html = render_template("chat/_model_picker.html", conversation=conversation, error=error)
    if error is None:  # another model, another window: the gauge follows at once
        gauge = gauge_of(conversation_id)
        html += render_template("chat/_context_gauge.html", gauge=gauge, swap_oob=True)
    return html, status
