"""The settings hub: API tokens for scripts (memory and onboarding come later)."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask_login import current_user, login_required
from sqlalchemy import select

from app.accounts.models import ApiToken
from app.db import utcnow
from app.web.access import owned_or_404
from app.web.forms import ConfirmForm, TokenForm
from app.web.identity import db_session

bp = Blueprint("settings", __name__, url_prefix="/settings")


def _tokens() -> list[ApiToken]:
    query = (
        select(ApiToken)
        .where(ApiToken.user_id == current_user.id)
        .order_by(ApiToken.created_at.desc(), ApiToken.id.desc())
    )
    return list(db_session().scalars(query))


@bp.get("")
@login_required
def hub():
    return render_template(
        "settings/hub.html", tokens=_tokens(), form=TokenForm(), confirm=ConfirmForm()
    )


@bp.post("/tokens")
@login_required
def create_token():
    form = TokenForm()
    if not form.validate():
        return render_template(
            "settings/_tokens.html", tokens=_tokens(), form=form, confirm=ConfirmForm()
        ), 400
    session = db_session()
    token, raw = ApiToken.issue(session.merge(current_user), form.name.data.strip())
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
    token = owned_or_404(ApiToken, token_id)
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        db_session().commit()
    return render_template(
        "settings/_tokens.html",
        tokens=_tokens(),
        form=TokenForm(formdata=None),
        confirm=ConfirmForm(),
    )
