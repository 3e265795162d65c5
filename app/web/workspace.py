"""Workspace pages: offers and personas (list, create, edit), saved agent outputs and visual
assets (list, filter, view, delete)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, flash, make_response, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from sqlalchemy import func, select

from app.accounts.projects import READ, WRITE
from app.web.access import is_htmx, owned_or_404, page_project_id, require_in_project
from app.web.forms import ConfirmForm, OfferForm, PersonaForm
from app.web.identity import db_session, services
from app.web.input_gate import id_from_text
from app.workspace.images import placeholder_png
from app.workspace.models import Offer, Output, Persona, VisualAsset

bp = Blueprint("workspace", __name__, url_prefix="/workspace")


def _offers() -> list[Offer]:
    query = select(Offer).where(Offer.project_id == page_project_id()).order_by(Offer.name)
    return list(db_session().scalars(query))


def _action() -> str:
    """What a form request does: a POST changes (an editor's or owner's), a GET reads."""
    return WRITE if request.method == "POST" else READ


def _writable_project() -> int:
    """The page's project, when the caller may add to it (else 403)."""
    project_id = page_project_id()
    require_in_project(project_id, WRITE)
    return project_id


@bp.get("/")
@login_required
def home():
    """The workspace opens on the offers."""
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
    """One's offers."""
    return render_template("workspace/offers.html", offers=_offers())


@bp.route("/offers/new", methods=["GET", "POST"])
@bp.route("/offers/<int:offer_id>/edit", methods=["GET", "POST"])
@login_required
def edit_offer(offer_id: int | None = None):
    """A new offer's form, or an offer's (GET), saved by POST."""
    offer = owned_or_404(Offer, offer_id, _action()) if offer_id else None
    form = OfferForm(obj=offer)
    if isinstance(form.brand_colors.data, list):
        # Taken from the offer (a GET, or a script's POST that leaves the field out):
        # show the stored list as the text the field expects.
        form.brand_colors.data = ", ".join(form.brand_colors.data)
    if form.validate_on_submit():
        session = db_session()
        if offer is None:
            offer = Offer(user_id=current_user.id, project_id=_writable_project())
            session.add(offer)
        form.apply_to(offer)
        session.commit()
        flash(f"Saved {offer.name}.")
        return redirect(url_for("workspace.offers"))
    status = 400 if request.method == "POST" else 200
    return render_template("workspace/offer_form.html", form=form, offer=offer), status


@bp.get("/personas")
@login_required
def personas():
    """One's personas."""
    query = select(Persona).where(Persona.project_id == page_project_id()).order_by(Persona.name)
    offers = {offer.id: offer for offer in _offers()}
    return render_template(
        "workspace/personas.html", personas=list(db_session().scalars(query)), offers=offers
    )


@bp.route("/personas/new", methods=["GET", "POST"])
@bp.route("/personas/<int:persona_id>/edit", methods=["GET", "POST"])
@login_required
def edit_persona(persona_id: int | None = None):
    """A new persona's form, or a persona's (GET), saved by POST."""
    persona = owned_or_404(Persona, persona_id, _action()) if persona_id else None
    form = PersonaForm(obj=persona)
    # Choices are the caller's own offers only, so a foreign offer id fails validation.
    form.offer_id.choices = [(0, "Any offer")] + [(o.id, o.name) for o in _offers()]
    if request.method == "GET" and persona:
        form.offer_id.data = persona.offer_id or 0
    if form.validate_on_submit():
        session = db_session()
        if persona is None:
            persona = Persona(user_id=current_user.id, project_id=_writable_project())
            session.add(persona)
        form.apply_to(persona)
        session.commit()
        flash(f"Saved {persona.name}.")
        return redirect(url_for("workspace.personas"))
    status = 400 if request.method == "POST" else 200
    return render_template("workspace/persona_form.html", form=form, persona=persona), status


@bp.post("/offers/<int:offer_id>/delete")
@login_required
def delete_offer(offer_id: int):
    """What was made for the offer stays: its personas, outputs, images and campaigns
    are kept, no longer tied to an offer (the keys are ON DELETE SET NULL)."""
    return _delete(owned_or_404(Offer, offer_id, WRITE), "workspace.offers", Offer)


@bp.post("/personas/<int:persona_id>/delete")
@login_required
def delete_persona(persona_id: int):
    """Characters cast from the persona stay, no longer tied to it."""
    return _delete(owned_or_404(Persona, persona_id, WRITE), "workspace.personas", Persona)


def _delete(item, listing: str, model):
    session = db_session()
    name = item.name
    session.delete(item)
    session.commit()
    return _after_delete(name, url_for(listing), "", none_left=not _count(model))


# Saved outputs and visual assets


def _offer_filter() -> int | None:
    """The ?offer= filter as an id, or None for "all offers" (or anything unreadable)."""
    raw = request.args.get("offer", "")
    return id_from_text(raw)


def _agent_names() -> dict[str, str]:
    """Agent slug -> display name, from the loaded catalog."""
    catalog = getattr(services(), "agents", None)
    return {agent.slug: agent.name for agent in catalog} if catalog else {}


def _wants_fragment(target: str) -> bool:
    """An htmx request that swaps only `target` (a filter change), not a history restore."""
    return is_htmx() and request.headers.get("HX-Target") == target


def _count(model) -> int:
    """How many `model` rows the caller owns."""
    query = select(func.count()).select_from(model).where(model.project_id == page_project_id())
    return db_session().scalar(query) or 0


def _after_delete(title: str, listing: str, own_page: str, none_left: bool):
    """htmx from a list: an empty answer that replaces (removes) the item. From the item's
    own page, or once the last one is gone (to show the empty state): go to the list."""
    if is_htmx():
        current = urlsplit(request.headers.get("HX-Current-URL", "")).path
        if not none_left and current.rstrip("/") != own_page:
            return make_response("", 200)
        flash(f"Deleted {title}.")
        response = make_response("", 200)
        response.headers["HX-Redirect"] = listing
        return response
    flash(f"Deleted {title}.")
    return redirect(listing)


def plain_text(value: Any) -> str:
    """Structured content as indented plain text, for pasting into a document."""
    return "\n".join(_text_lines(value, top=True)).strip("\n") + "\n"


def _scalar_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _label(key: Any) -> str:
    label = str(key).replace("_", " ").strip()
    return label[:1].upper() + label[1:]


def _text_lines(value: Any, top: bool = False) -> list[str]:
    if isinstance(value, dict):
        lines: list[str] = []
        for key, item in value.items():
            if isinstance(item, dict | list):
                if top and lines:
                    lines.append("")
                lines.append(f"{_label(key)}:")
                lines.extend("  " + line for line in _text_lines(item))
            else:
                first, *rest = _scalar_text(item).splitlines() or [""]
                lines.append(f"{_label(key)}: {first}".rstrip())
                lines.extend("  " + line for line in rest)
        return lines
    if isinstance(value, list):
        lines = []
        for number, item in enumerate(value, 1):
            marker = f"{number}. "
            first, *rest = _text_lines(item) or [""]
            lines.append((marker + first).rstrip())
            lines.extend((" " * len(marker) + line).rstrip() for line in rest)
        return lines
    return _scalar_text(value).splitlines() or [""]


@bp.get("/outputs")
@login_required
def outputs():
    """Everything the agents wrote for one, filtered by offer and agent."""
    session = db_session()
    offer_id = _offer_filter()
    agent = request.args.get("agent", "")[:60]
    query = select(Output).where(Output.project_id == page_project_id())
    if offer_id is not None:
        query = query.where(Output.offer_id == offer_id)
    if agent:
        query = query.where(Output.agent == agent)
    found = list(session.scalars(query.order_by(Output.created_at.desc(), Output.id.desc())))
    has_any = bool(found) or _count(Output) > 0
    names = _agent_names()
    used = session.scalars(
        select(Output.agent).where(Output.project_id == page_project_id()).distinct()
    )
    agents = dict(names)
    for slug in used:
        agents.setdefault(slug, slug)
    context = {
        "outputs": found,
        "has_any": has_any,
        "offers": {offer.id: offer for offer in _offers()},
        "agent_names": names,
        "agents": sorted(agents.items(), key=lambda item: item[1].lower()),
        "offer_filter": offer_id,
        "agent_filter": agent,
        "form": ConfirmForm(),
    }
    if _wants_fragment("output-list"):
        return render_template("workspace/_output_list.html", **context)
    return render_template("workspace/outputs.html", **context)


def _own_offer(offer_id: int | None, project_id: int) -> Offer | None:
    """The offer a saved item points at, when it is in the item's project (else none)."""
    offer = db_session().get(Offer, offer_id) if offer_id else None
    return offer if offer is not None and offer.project_id == project_id else None


@bp.get("/outputs/<int:output_id>")
@login_required
def output(output_id: int):
    """One saved output, readable, as plain text and as JSON."""
    saved = owned_or_404(Output, output_id)
    return render_template(
        "workspace/output.html",
        output=saved,
        offer=_own_offer(saved.offer_id, saved.project_id),
        agent_name=_agent_names().get(saved.agent, saved.agent),
        text=plain_text(saved.content),
        json_text=json.dumps(saved.content, indent=2, ensure_ascii=False),
        form=ConfirmForm(),
    )


@bp.post("/outputs/<int:output_id>/delete")
@login_required
def delete_output(output_id: int):
    """Delete a saved output."""
    session = db_session()
    saved = owned_or_404(Output, output_id, WRITE)
    title = saved.title
    session.delete(saved)
    session.commit()
    return _after_delete(
        title,
        url_for("workspace.outputs"),
        url_for("workspace.output", output_id=output_id),
        none_left=not _count(Output),
    )


@bp.get("/assets")
@login_required
def assets():
    """The images made for one, filtered by offer."""
    session = db_session()
    offer_id = _offer_filter()
    query = select(VisualAsset).where(VisualAsset.project_id == page_project_id())
    if offer_id is not None:
        query = query.where(VisualAsset.offer_id == offer_id)
    found = list(
        session.scalars(query.order_by(VisualAsset.created_at.desc(), VisualAsset.id.desc()))
    )
    has_any = bool(found) or _count(VisualAsset) > 0
    context = {
        "assets": found,
        "has_any": has_any,
        "offers": {offer.id: offer for offer in _offers()},
        "offer_filter": offer_id,
        "form": ConfirmForm(),
    }
    if _wants_fragment("asset-list"):
        return render_template("workspace/_asset_list.html", **context)
    return render_template("workspace/assets.html", **context)


@bp.get("/assets/<int:asset_id>/view")
@login_required
def view_asset(asset_id: int):
    """One image with its prompt and offer."""
    asset = owned_or_404(VisualAsset, asset_id)
    return render_template(
        "workspace/asset.html",
        asset=asset,
        offer=_own_offer(asset.offer_id, asset.project_id),
        form=ConfirmForm(),
    )


@bp.post("/assets/<int:asset_id>/delete")
@login_required
def delete_asset(asset_id: int):
    """Delete an image."""
    session = db_session()
    asset = owned_or_404(VisualAsset, asset_id, WRITE)
    title = asset.title
    session.delete(asset)
    session.commit()
    return _after_delete(
        title,
        url_for("workspace.assets"),
        url_for("workspace.view_asset", asset_id=asset_id),
        none_left=not _count(VisualAsset),
    )
