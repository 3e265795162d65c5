"""Presets over JSON: `/api/presets` lists a person's own and the admin's for everyone;
one preset is read, changed and deleted at `/api/presets/<id>`. A person's own is theirs
alone (404 for anyone else); one for everyone is read by all and changed by admins only
(403 for others). The rules are app/chat/presets.py's, as for the pages."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from flask_login import current_user, login_required

from app.chat.preset_models import Preset
from app.chat.presets import (
    PresetFields,
    PresetRefused,
    offered_groups,
    save_preset,
    visible_preset,
    visible_presets,
)
from app.error_codes import ErrorCode
from app.web.api import body_of
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.openapi import documented
from app.web.preset_shapes import PresetBody, PresetOut, PresetPatch, PresetsOut

bp = Blueprint("presets_api", __name__, url_prefix="/api")
REFUSED = (ErrorCode.PRESET_REFUSED, ErrorCode.FORBIDDEN)


def preset_dict(preset: Preset) -> dict:
    return {
        "id": preset.id,
        "name": preset.name,
        "shared": preset.shared,
        "instructions": preset.instructions,
        "model": preset.model,
        "tool_groups": list(preset.tool_groups or []),
        "starters": list(preset.starters or []),
        "updated_at": preset.updated_at.isoformat() + "Z",
    }


def groups_list() -> list[dict]:
    services = current_app.extensions["services"]
    return [
        {"key": group.key, "label": group.label, "description": group.description}
        for group in offered_groups(services.tools, services.settings)
    ]


def changed_preset(preset: Preset, fields: PresetFields) -> Preset:
    """Save the fields on the preset, or 400 PRESET_REFUSED naming the one at fault with
    nothing written; committed when saved."""
    services, session = current_app.extensions["services"], db_session()
    try:
        save_preset(session, services.settings, services.tools, preset, fields)
    except PresetRefused as refused:
        session.rollback()
        raise ApiError(400, str(refused), ErrorCode.PRESET_REFUSED, field=refused.field) from None
    session.commit()
    return preset


def _fields(body: PresetPatch) -> PresetFields:
    given = body.model_fields_set
    return PresetFields(
        **{name: getattr(body, name) for name in PresetFields.__dataclass_fields__ if name in given}
    )


def _preset(preset_id: int, change: bool = False) -> Preset:
    """One the caller sees (404 for another person's); to change one for everyone, the
    caller must be an admin (403)."""
    preset = visible_preset(db_session(), preset_id, current_user.id)
    if preset is None:
        raise ApiError(404, "No such preset of yours.", ErrorCode.NOT_FOUND)
    if change and preset.shared and not current_user.is_admin:
        raise ApiError(403, "Only an admin may change a preset for everyone.", ErrorCode.FORBIDDEN)
    return preset


@bp.get("/presets")
@documented("GET", "Your presets and those for everyone", response=PresetsOut)
@login_required
def list_presets():
    presets = visible_presets(db_session(), current_user.id)
    return jsonify({"presets": [preset_dict(p) for p in presets], "tool_groups": groups_list()})


@bp.post("/presets")
@documented(
    "POST",
    "Save a preset",
    response=PresetOut,
    status=201,
    body=PresetBody,
    errors=REFUSED,
    description="`shared: true` saves it for everyone (admins only). Tool groups left out:"
    " all of them.",
)
@login_required
def create_preset():
    body = body_of(PresetBody)
    if body.shared and not current_user.is_admin:
        raise ApiError(403, "Only an admin may save a preset for everyone.", ErrorCode.FORBIDDEN)
    preset = Preset(user_id=None if body.shared else current_user.id)
    return jsonify(preset_dict(changed_preset(preset, _fields(body)))), 201


@bp.get("/presets/<int:preset_id>")
@documented("GET", "A preset", response=PresetOut)
@login_required
def get_preset(preset_id: int):
    return jsonify(preset_dict(_preset(preset_id)))


@bp.patch("/presets/<int:preset_id>")
@documented(
    "PATCH", "Change a preset", response=PresetOut, body=PresetPatch, partial=True, errors=REFUSED
)
@login_required
def patch_preset(preset_id: int):
    preset = _preset(preset_id, change=True)
    return jsonify(preset_dict(changed_preset(preset, _fields(body_of(PresetPatch)))))


@bp.delete("/presets/<int:preset_id>")
@documented(
    "DELETE",
    "Delete a preset",
    status=204,
    errors=(ErrorCode.FORBIDDEN,),
    description="Chats started from it keep going without it.",
)
@login_required
def delete_preset(preset_id: int):
    session = db_session()
    session.delete(_preset(preset_id, change=True))
    session.commit()
    return "", 204
