"""Log in, log out, sign up."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from flask_login import login_required, login_user, logout_user
from sqlalchemy import select

from app.accounts.models import User, dummy_password_check
from app.accounts.service import AccountError, create_user
from app.extensions import limiter
from app.web.forms import ConfirmForm, LoginForm, SignupForm
from app.web.identity import db_session

bp = Blueprint("auth", __name__)

LOGIN_FAILED = "That email and password do not match an account."


def _safe_next(target: str | None) -> str:
    """Only same-site paths: never bounce a fresh login to another host."""
    if not target:
        return url_for("chat.index")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return url_for("chat.index")
    return target


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit("20 per minute", methods=["POST"])
def login():
    form = LoginForm()
    if form.validate_on_submit():
        email = User.normalize_email(form.email.data)
        user = db_session().scalar(select(User).where(User.email == email))
        if user is None:
            dummy_password_check(form.password.data)
        elif user.check_password(form.password.data):
            login_user(user)
            return redirect(_safe_next(request.args.get("next")))
        form.password.errors.append(LOGIN_FAILED)
        return render_template("auth/login.html", form=form), 400
    status = 400 if request.method == "POST" else 200
    return render_template("auth/login.html", form=form), status


@bp.route("/signup", methods=["GET", "POST"])
def signup():
    if not current_app.config["LOOPDESK"].open_signup:
        return render_template("auth/signup_closed.html"), 403
    form = SignupForm()
    if form.validate_on_submit():
        session = db_session()
        try:
            user = create_user(session, form.email.data, form.password.data)
        except AccountError:
            session.rollback()
            # Vague on purpose: do not confirm whether the email has an account.
            form.email.errors.append("Could not create that account. Try logging in instead.")
            return render_template("auth/signup.html", form=form), 400
        user.needs_onboarding = True  # only self-made accounts get the welcome step
        session.commit()
        login_user(user)
        flash("Welcome to Loopdesk.")
        return redirect(url_for("chat.index"))
    status = 400 if request.method == "POST" else 200
    return render_template("auth/signup.html", form=form), status


@bp.route("/logout", methods=["GET", "POST"])
@login_required
def logout():
    if request.method == "GET":
        return render_template("auth/logout.html", form=ConfirmForm())
    logout_user()
    return redirect(url_for("auth.login"))
