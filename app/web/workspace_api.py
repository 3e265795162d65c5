"""The workspace as JSON (docs/CONTRACT.md): offers and personas (list, get, create,
update, delete), outputs and assets (list, get, delete; an asset's image), characters
and campaigns (list, get). Bodies are validated by the page's own forms, so a script
gets the same rules and messages as a person; what is not yours answers 404."""

from __future__ import annotations

import re

from flask import Blueprint, jsonify, request, url_for
from flask_login import current_user, login_required
from sqlalchemy import select
from werkzeug.datastructures import MultiDict

from app.accounts.projects import READ, WRITE, personal_project_id
from app.db import read_transaction
from app.error_codes import ErrorCode
from app.web.access import owned_or_404, require_in_project
from app.web.errors import ApiError
from app.web.forms import HEX_COLOUR, OfferForm, PersonaForm
from app.web.identity import db_session
from app.web.openapi import MAX_ID, Param, digits, documented
from app.web.shapes import (
    AssetOut,
    CampaignOut,
    CharacterOut,
    OfferOut,
    OutputOut,
    PersonaOut,
    page_of,
)
from app.web.workspace import asset_image
from app.workspace.models import Campaign, Character, Offer, Output, Persona, VisualAsset

bp = Blueprint("workspace_api", __name__, url_prefix="/api")

MAX_LIMIT = 100
IN_PROJECT = Param("project_id", digits(10, "a project of yours (default: your personal project)"))
# A write a viewer's role does not allow answers 403 PROJECT_ROLE.
ROLE = (ErrorCode.PROJECT_ROLE,)
PAGE = (
    IN_PROJECT,
    Param("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}, "default 50"),
    Param("cursor", digits(10, "next_cursor of a page (one past the last id: an empty page)")),
)


# -- reading ------------------------------------------------------------------------------


def own_page(
    model, shape, limit: int = 50, after: int = 0, dump=None, project_id: int | None = None
) -> dict:
    """One page of `model` in a project of the caller's (by default their personal one),
    oldest first, as the API and the MCP server answer it; the cursor is the last id
    given. 404 when the caller is not a member of the project."""
    session = db_session()
    with read_transaction(session):
        if project_id is None:
            project_id = personal_project_id(session, current_user.id)
        require_in_project(project_id, READ)
        if after >= MAX_ID:  # past every id the database can hold (and its INTEGER column)
            return {"items": [], "next_cursor": None}
        items = list(
            session.scalars(
                select(model)
                .where(model.project_id == project_id, model.id > after)
                .order_by(model.id)
                .limit(limit + 1)
            )
        )
        more = len(items) > limit
        items = items[:limit]
        return {
            "items": [(dump or shape.dump)(item) for item in items],
            "next_cursor": str(items[-1].id) if more else None,
        }


def own_one(model, item_id: int, shape, dump=None) -> dict:
    """One of the caller's items as the API answers it; 404 for another's or a missing one."""
    session = db_session()
    with read_transaction(session):
        return (dump or shape.dump)(owned_or_404(model, item_id))


def _page(model, shape, dump=None):
    return jsonify(own_page(model, shape, _limit(), _cursor(), dump, requested_project()))


def _one(model, item_id: int, shape, dump=None):
    return jsonify(own_one(model, item_id, shape, dump))


def _limit() -> int:
    raw = request.args.get("limit", "50")
    if not re.fullmatch(r"[0-9]{1,3}", raw) or not 1 <= int(raw) <= MAX_LIMIT:
        raise ApiError(
            400,
            f"'limit' must be a whole number from 1 to {MAX_LIMIT}.",
            ErrorCode.INVALID_FIELD,
            field="limit",
        )
    return int(raw)


def _cursor() -> int:
    raw = request.args.get("cursor", "0")
    if not re.fullmatch(r"[0-9]{1,10}", raw):
        raise ApiError(
            400, "'cursor' is not one this API gave out.", ErrorCode.INVALID_FIELD, field="cursor"
        )
    return int(raw)


# -- writing through the page's forms -------------------------------------------------------


def _validated(form_class, current: dict | None = None, **configure):
    """The form filled from the JSON body (over `current` values, for an update), or a
    400 that names the first field at fault with the form's own message."""
    data = _json_object()
    names = [
        f.name for f in form_class(formdata=None, meta={"csrf": False}) if f.name != "csrf_token"
    ]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ApiError(
            400,
            f"Unknown field(s): {', '.join(unknown)}.",
            ErrorCode.INVALID_FIELD,
            field=unknown[0],
        )
    values = dict(current or {})
    for name, value in data.items():
        values[name] = _form_value(form_class, name, value)
    form = form_class(formdata=MultiDict(values), meta={"csrf": False})
    for name, choices in configure.items():
        getattr(form, name).choices = choices
        if name in data and getattr(form, name).data not in {value for value, _ in choices}:
            # An id of something that is not yours, or absent: 404, as in a path.
            raise ApiError(
                404, f"'{name}': no such item of yours.", ErrorCode.NOT_FOUND, field=name
            )
    if not form.validate():
        name, messages = next(iter(form.errors.items()))
        label = getattr(form, name).label.text
        raise ApiError(400, f"{name} ({label}): {messages[0]}", ErrorCode.INVALID_FIELD, field=name)
    return form


def _form_value(form_class, name: str, value) -> str:
    """A JSON value as the form field reads it from a browser."""
    shape = getattr(form_class, "api_shapes", {}).get(name, {})
    if shape.get("type") == "array":
        # Exactly the document's list: each item a whole colour (the page's text field
        # trims and splits; a list item is taken as it is), at most maxItems.
        if (
            not isinstance(value, list)
            or len(value) > shape["maxItems"]
            or not all(isinstance(item, str) and HEX_COLOUR.fullmatch(item) for item in value)
        ):
            raise ApiError(
                400,
                f"'{name}' must be a list of at most {shape['maxItems']} colours like #1f6feb.",
                ErrorCode.INVALID_FIELD,
                field=name,
            )
        return ", ".join(value)
    if name == "offer_id":
        if value is None:
            return "0"  # the form's "Any offer"
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON Schema's integer takes 2.0 as 2
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
            raise ApiError(
                400,
                "'offer_id' must be an offer's id or null.",
                ErrorCode.INVALID_FIELD,
                field=name,
            )
        return str(value)
    if not isinstance(value, str):
        raise ApiError(400, f"'{name}' must be a string.", ErrorCode.INVALID_FIELD, field=name)
    return value


def requested_project() -> int | None:
    """The `project_id` query parameter (None: not given); a malformed one is a 400."""
    raw = request.args.get("project_id")
    if raw is None:
        return None
    if not re.fullmatch(r"[0-9]{1,10}", raw):
        raise ApiError(
            400, "'project_id' must be a project's id.", ErrorCode.INVALID_FIELD, field="project_id"
        )
    if int(raw) > MAX_ID:  # past every id the database can hold: no such project
        raise ApiError(404, "Not found.", ErrorCode.NOT_FOUND)
    return int(raw)


def _json_object() -> dict:
    if not request.is_json:
        raise ApiError(415, "Send a JSON body with Content-Type: application/json.")
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object.", ErrorCode.INVALID_JSON)
    return data


def _offer_choices(project_id: int) -> list[tuple[int, str]]:
    """The offers a persona of the project may name: the project's own."""
    offers = db_session().scalars(select(Offer).where(Offer.project_id == project_id))
    return [(0, "Any offer")] + [(offer.id, offer.name) for offer in offers]


def _offer_values(offer: Offer) -> dict:
    return {
        "name": offer.name,
        "description": offer.description,
        "audience": offer.audience,
        "price": offer.price,
        "brand_colors": ", ".join(offer.brand_colors or []),
    }


def _persona_values(persona: Persona) -> dict:
    return {
        "name": persona.name,
        "offer_id": str(persona.offer_id or 0),
        "description": persona.description,
        "pains": persona.pains,
        "goals": persona.goals,
    }


def _create(model, shape, form_class, defaults: dict, **choices):
    """A new item of the caller's from the JSON body, through the page's form, in the
    project named by `?project_id=` (by default their personal one): an editor's or
    owner's, else 403 (404 for a non-member)."""
    request.get_data(cache=True)  # the body is read before the write lock is taken
    project_id = requested_project()
    if project_id is None:
        project_id = personal_project_id(db_session(), current_user.id)
    require_in_project(project_id, WRITE)
    loaded = {name: load(project_id) for name, load in choices.items()}
    form = _validated(form_class, defaults, **loaded)
    item = model(user_id=current_user.id, project_id=project_id)
    form.apply_to(item)
    return _save(item, 201, shape)


def _item(model, item_id: int, shape, form_class, current_values, **choices):
    """GET, PATCH (fields left out keep their value) or DELETE one of the caller's items."""
    if request.method == "GET":
        return _one(model, item_id, shape)
    if request.method == "DELETE":
        return _delete(model, item_id)
    request.get_data(cache=True)
    found = owned_or_404(model, item_id, WRITE)
    loaded = {name: load(found.project_id) for name, load in choices.items()}
    form = _validated(form_class, current_values(found), **loaded)
    form.apply_to(found)
    return _save(found, 200, shape)


def _save(item, status: int, shape):
    session = db_session()
    session.add(item)
    session.commit()
    return jsonify(shape.dump(item)), status


def _delete(model, item_id: int):
    session = db_session()
    session.delete(owned_or_404(model, item_id, WRITE))
    session.commit()
    return "", 204


# -- offers ---------------------------------------------------------------------------------


@bp.get("/offers")
@documented("GET", "List your offers", response=page_of(OfferOut), query=PAGE)
@login_required
def list_offers():
    return _page(Offer, OfferOut)


@bp.post("/offers")
@documented(
    "POST",
    "Create an offer",
    response=OfferOut,
    status=201,
    body=OfferForm,
    query=(IN_PROJECT,),
    errors=ROLE,
)
@login_required
def create_offer():
    return _create(Offer, OfferOut, OfferForm, {})


@bp.get("/offers/<int:offer_id>")
@documented("GET", "One offer", response=OfferOut)
@bp.patch("/offers/<int:offer_id>")
@documented(
    "PATCH", "Change an offer", response=OfferOut, body=OfferForm, partial=True, errors=ROLE
)
@bp.delete("/offers/<int:offer_id>")
@documented(
    "DELETE",
    "Delete an offer",
    status=204,
    description="Its personas, outputs, assets and campaigns are kept, with offer_id null.",
    errors=ROLE,
)
@login_required
def offer(offer_id: int):
    return _item(Offer, offer_id, OfferOut, OfferForm, _offer_values)


# -- personas -------------------------------------------------------------------------------


@bp.get("/personas")
@documented("GET", "List your personas", response=page_of(PersonaOut), query=PAGE)
@login_required
def list_personas():
    return _page(Persona, PersonaOut)


@bp.post("/personas")
@documented(
    "POST",
    "Create a persona",
    response=PersonaOut,
    status=201,
    body=PersonaForm,
    query=(IN_PROJECT,),
    errors=ROLE,
)
@login_required
def create_persona():
    return _create(Persona, PersonaOut, PersonaForm, {"offer_id": "0"}, offer_id=_offer_choices)


@bp.get("/personas/<int:persona_id>")
@documented("GET", "One persona", response=PersonaOut)
@bp.patch("/personas/<int:persona_id>")
@documented(
    "PATCH", "Change a persona", response=PersonaOut, body=PersonaForm, partial=True, errors=ROLE
)
@bp.delete("/personas/<int:persona_id>")
@documented(
    "DELETE",
    "Delete a persona",
    status=204,
    description="Characters cast from it are kept, with persona_id null.",
    errors=ROLE,
)
@login_required
def persona(persona_id: int):
    return _item(
        Persona, persona_id, PersonaOut, PersonaForm, _persona_values, offer_id=_offer_choices
    )


# -- outputs and assets ---------------------------------------------------------------------


@bp.get("/outputs")
@documented("GET", "List what the agents wrote for you", response=page_of(OutputOut), query=PAGE)
@login_required
def list_outputs():
    return _page(Output, OutputOut)


@bp.get("/outputs/<int:output_id>")
@documented("GET", "One output", response=OutputOut)
@bp.delete("/outputs/<int:output_id>")
@documented("DELETE", "Delete an output", status=204, errors=ROLE)
@login_required
def output(output_id: int):
    if request.method == "DELETE":
        return _delete(Output, output_id)
    return _one(Output, output_id, OutputOut)


def asset_dict(asset: VisualAsset) -> dict:
    image = url_for("workspace_api.asset_file", asset_id=asset.id)
    return AssetOut.dump({**_columns(asset), "image_url": image})


def _columns(item) -> dict:
    return {column.key: getattr(item, column.key) for column in item.__table__.columns}


@bp.get("/assets")
@documented("GET", "List your images", response=page_of(AssetOut), query=PAGE)
@login_required
def list_assets():
    return _page(VisualAsset, AssetOut, asset_dict)


@bp.get("/assets/<int:asset_id>")
@documented("GET", "One image's details", response=AssetOut)
@bp.delete("/assets/<int:asset_id>")
@documented("DELETE", "Delete an image", status=204, errors=ROLE)
@login_required
def asset(asset_id: int):
    if request.method == "DELETE":
        return _delete(VisualAsset, asset_id)
    return _one(VisualAsset, asset_id, AssetOut, asset_dict)


@bp.get("/assets/<int:asset_id>/image")
@documented("GET", "The image itself (PNG placeholder artwork until made)", media_type="image/*")
@login_required
def asset_file(asset_id: int):
    return asset_image(asset_id)


# -- characters and campaigns (made by the agents; read-only here, as on the page) ----------


@bp.get("/characters")
@documented("GET", "List your characters", response=page_of(CharacterOut), query=PAGE)
@login_required
def list_characters():
    return _page(Character, CharacterOut)


@bp.get("/characters/<int:character_id>")
@documented("GET", "One character", response=CharacterOut)
@login_required
def character(character_id: int):
    return _one(Character, character_id, CharacterOut)


@bp.get("/campaigns")
@documented("GET", "List your campaigns", response=page_of(CampaignOut), query=PAGE)
@login_required
def list_campaigns():
    return _page(Campaign, CampaignOut)


@bp.get("/campaigns/<int:campaign_id>")
@documented("GET", "One campaign", response=CampaignOut)
@login_required
def campaign(campaign_id: int):
    return _one(Campaign, campaign_id, CampaignOut)
