"""Workspace pages: offers and personas (list, create, edit)."""

from __future__ import annotations

from flask import Blueprint, flash, make_response, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from sqlalchemy import select

from app.web.access import owned_or_404
from app.web.forms import OfferForm, PersonaForm
from app.web.identity import db_session
from app.workspace.images import placeholder_png
from app.workspace.models import Offer, Persona, VisualAsset

bp = Blueprint("workspace", __name__, url_prefix="/workspace")


def _offers() -> list[Offer]:
    query = select(Offer).where(Offer.user_id == current_user.id).order_by(Offer.name)
    return list(db_session().scalars(query))


@bp.get("/")
@login_required
def home():
    return redirect(url_for("workspace.offers"))


@bp.get("/assets/<int:asset_id>")
@login_required
def asset_image(asset_id: int):
    """The asset's image, or placeholder artwork in its offer's colours."""
    asset = owned_or_404(VisualAsset, asset_id)
    if asset.data:
        response = make_response(asset.data)
        response.headers["Content-Type"] = asset.content_type
    else:
        colours = tuple(asset.meta.get("colors") or ())
        response = make_response(placeholder_png(colours))
        response.headers["Content-Type"] = "image/png"
    response.headers["Cache-Control"] = "private, max-age=3600"
    return response


@bp.get("/offers")
@login_required
def offers():
    return render_template("workspace/offers.html", offers=_offers())


@bp.route("/offers/new", methods=["GET", "POST"])
@bp.route("/offers/<int:offer_id>/edit", methods=["GET", "POST"])
@login_required
def edit_offer(offer_id: int | None = None):
    offer = owned_or_404(Offer, offer_id) if offer_id else None
    form = OfferForm(obj=offer)
    if isinstance(form.brand_colors.data, list):
        # Taken from the offer (a GET, or a script's POST that leaves the field out):
        # show the stored list as the text the field expects.
        form.brand_colors.data = ", ".join(form.brand_colors.data)
    if form.validate_on_submit():
        session = db_session()
        if offer is None:
            offer = Offer(user_id=current_user.id)
            session.add(offer)
        offer.name = form.name.data.strip()
        offer.description = form.description.data or ""
        offer.audience = form.audience.data or ""
        offer.price = form.price.data or ""
        offer.brand_colors = form.colour_list()
        session.commit()
        flash(f"Saved {offer.name}.")
        return redirect(url_for("workspace.offers"))
    status = 400 if request.method == "POST" else 200
    return render_template("workspace/offer_form.html", form=form, offer=offer), status


@bp.get("/personas")
@login_required
def personas():
    query = select(Persona).where(Persona.user_id == current_user.id).order_by(Persona.name)
    offers = {offer.id: offer for offer in _offers()}
    return render_template(
        "workspace/personas.html", personas=list(db_session().scalars(query)), offers=offers
    )


@bp.route("/personas/new", methods=["GET", "POST"])
@bp.route("/personas/<int:persona_id>/edit", methods=["GET", "POST"])
@login_required
def edit_persona(persona_id: int | None = None):
    persona = owned_or_404(Persona, persona_id) if persona_id else None
    form = PersonaForm(obj=persona)
    # Choices are the caller's own offers only, so a foreign offer id fails validation.
    form.offer_id.choices = [(0, "Any offer")] + [(o.id, o.name) for o in _offers()]
    if request.method == "GET" and persona:
        form.offer_id.data = persona.offer_id or 0
    if form.validate_on_submit():
        session = db_session()
        if persona is None:
            persona = Persona(user_id=current_user.id)
            session.add(persona)
        persona.name = form.name.data.strip()
        persona.offer_id = form.offer_id.data or None
        persona.description = form.description.data or ""
        persona.pains = form.pains.data or ""
        persona.goals = form.goals.data or ""
        session.commit()
        flash(f"Saved {persona.name}.")
        return redirect(url_for("workspace.personas"))
    status = 400 if request.method == "POST" else 200
    return render_template("workspace/persona_form.html", form=form, persona=persona), status
