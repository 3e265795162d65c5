"""The models people may pick, over JSON: `GET /api/models` for everyone signed in, and the
admin's list (`/api/admin/models`). The rules are app/chat/offered_models.py's, as for the
command line and the admin page."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from flask_login import login_required

from app.chat.model_choice import ChosenModel, model_named, offered_models
from app.chat.offered_models import (
    ModelNameTaken,
    ModelRefused,
    ModelSpec,
    UnknownModel,
    add_model,
    change_model,
    find_model,
    make_default,
    remove_model,
)
from app.error_codes import ErrorCode
from app.web.admin import admin_required
from app.web.api import body_of
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.model_shapes import ModelBody, ModelOut, ModelPatch, ModelsOut
from app.web.openapi import documented

bp = Blueprint("models_api", __name__, url_prefix="/api")
REFUSED = (ErrorCode.MODEL_REFUSED,)
NUMBERS = ("credits", "window", "thinking_budget")


def _settings():
    return current_app.extensions["services"].settings


def model_dict(choice: ChosenModel) -> dict:
    return {
        "name": choice.name,
        "label": choice.label,
        "credits": choice.credits,
        "window": choice.window,
        "thinking_budget": choice.thinking_budget,
        "default": choice.default,
    }


def refused_error(refused: ModelRefused) -> ApiError:
    if isinstance(refused, UnknownModel):
        return ApiError(404, str(refused), ErrorCode.NOT_FOUND)
    status = 409 if isinstance(refused, ModelNameTaken) else 400
    return ApiError(status, str(refused), ErrorCode.MODEL_REFUSED, field=refused.field)


def _answer(name: str, status: int = 200):
    """The model as people see it now (after the caller's commit)."""
    choice = model_named(offered_models(db_session(), _settings()), name)
    assert choice is not None  # listed: the caller just wrote it
    return jsonify(model_dict(choice)), status


@bp.get("/models")
@documented("GET", "The models you may pick for a chat", response=ModelsOut)
@login_required
def list_models():
    """In order, one the default (what a chat that picked none answers with)."""
    choices = offered_models(db_session(), _settings())
    return jsonify({"models": [model_dict(choice) for choice in choices]})


@bp.post("/admin/models")
@documented(
    "POST",
    "List a model for people to pick (admins)",
    response=ModelOut,
    status=201,
    body=ModelBody,
    errors=REFUSED,
    description="The first model listed is the default; until one is, the operator's model is.",
)
@admin_required
def add_admin_model():
    body = body_of(ModelBody)
    session = db_session()
    spec = ModelSpec(body.label, body.credits, body.window, body.thinking_budget)
    try:
        model = add_model(session, body.name, spec, _settings().context_window_tokens, body.default)
    except ModelRefused as refused:
        session.rollback()
        raise refused_error(refused) from None
    session.commit()
    return _answer(model.name, 201)


@bp.patch("/admin/models/<name>")
@documented(
    "PATCH",
    "Change a listed model (admins)",
    response=ModelOut,
    body=ModelPatch,
    partial=True,
    errors=(*REFUSED, ErrorCode.NOT_FOUND),
)
@admin_required
def patch_admin_model(name: str):
    session = db_session()
    try:
        find_model(session, name)  # 404 before the body's faults
    except UnknownModel as unknown:
        raise refused_error(unknown) from None
    body = body_of(ModelPatch)
    sent = body.model_fields_set
    spec = ModelSpec(
        body.label if "label" in sent else None, body.credits, body.window, body.thinking_budget
    )
    cleared = frozenset(n for n in NUMBERS if n in sent and getattr(body, n) is None)
    try:
        model = change_model(session, name, spec, _settings().context_window_tokens, cleared)
        if body.default:
            make_default(session, name)
    except ModelRefused as refused:
        session.rollback()
        raise refused_error(refused) from None
    session.commit()
    return _answer(model.name)


@bp.delete("/admin/models/<name>")
@documented(
    "DELETE",
    "Take a model off the list (admins)",
    status=204,
    errors=(ErrorCode.NOT_FOUND,),
    description="Chats that picked it answer with the default from their next run, saying so.",
)
@admin_required
def delete_admin_model(name: str):
    session = db_session()
    try:
        remove_model(session, name)
    except ModelRefused as refused:
        session.rollback()
        raise refused_error(refused) from None
    session.commit()
    return "", 204
