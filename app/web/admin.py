"""The admin area: people (guidelines, memory and usage come with their issues)."""

from __future__ import annotations

from functools import wraps

from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask_login import current_user, login_required
from sqlalchemy import select

from app.accounts.models import User
from app.accounts.service import AccountError, create_user
from app.web.forms import UserCreateForm
from app.web.identity import db_session

bp = Blueprint("admin", __name__, url_prefix="/admin")


def admin_required(view):
    @wraps(view)
    @login_required
    def wrapper(*args, **kwargs):
        if not current_user.is_admin:
            abort(403)
        return view(*args, **kwargs)

    return wrapper


def _users() -> list[User]:
    return list(db_session().scalars(select(User).order_by(User.created_at, User.id)))


@bp.get("/")
@admin_required
def home():
    return redirect(url_for("admin.users"))


@bp.route("/users", methods=["GET", "POST"])
@admin_required
def users():
    form = UserCreateForm()
    if form.validate_on_submit():
        session = db_session()
        try:
            user = create_user(
                session, form.email.data, form.password.data, is_admin=form.is_admin.data
            )
        except AccountError as error:
            session.rollback()
            form.email.errors.append(str(error))
        else:
            session.commit()
            flash(f"Created {user.email}.")
            return redirect(url_for("admin.users"))
    status = 400 if form.errors else 200
    return render_template("admin/users.html", users=_users(), form=form), status
