"""What mailed links open: setting a new password (`/forgot`, `/reset/<token>`) and
confirming one's address (`/verify/<token>`, sending the link again). The rules are in
docs/security.md#password-reset: one answer whether or not an account exists, tokens
single use and short-lived, every session ended by a reset."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from sqlalchemy import select

from app.accounts.email_tokens import RESET, VERIFY, claim_email_token, holder_of
from app.accounts.models import User, end_sessions
from app.db import utcnow
from app.web.extensions import limiter
from app.web.forms import ForgotPasswordForm, ResetPasswordForm
from app.web.identity import client_address, db_session
from app.web.mailing import send_address_confirmation, send_password_reset
from app.web.session import end_this_session
from app.web.socket_access import announce_sessions_ended

bp = Blueprint("email_links", __name__)


def _mail_limit() -> str:
    return current_app.config["LOOPDESK"].rate_limit_mail


def _asked_address() -> str:
    """The account asked about at /forgot: its mails are limited apart from the asker's."""
    return "forgot:" + User.normalize_email(request.form.get("email", ""))[:254]


@bp.route("/forgot", methods=["GET", "POST"])
@limiter.limit(
    _mail_limit, key_func=lambda: f"address:{client_address()}", methods=["POST"], scope="mail"
)
@limiter.limit(_mail_limit, key_func=_asked_address, methods=["POST"], scope="forgot-account")
def forgot():
    """Ask for a reset link. The answer is the same page whether or not the address has an
    account; the mail, if any, is sent off the request."""
    form = ForgotPasswordForm()
    if not form.validate_on_submit():
        status = 400 if request.method == "POST" else 200
        return render_template("auth/forgot.html", form=form, sent_to=None), status
    email = User.normalize_email(form.email.data)
    user = db_session().scalar(select(User).where(User.email == email))
    if user is not None:
        send_password_reset(user)
    return render_template("auth/forgot.html", form=None, sent_to=email)


def _link_gone(what: str):
    return render_template("auth/link_gone.html", what=what), 404


@bp.route("/reset/<token>", methods=["GET", "POST"])
def reset(token: str):
    """The new-password form a reset link opens (GET), and setting it (POST): the link
    is used up, every session of the account ends (sockets too), and the person logs in
    with the new password."""
    session = db_session()
    user = holder_of(session, token, RESET)
    if user is None:
        return _link_gone("reset")
    form = ResetPasswordForm()
    form.account_email = user.email
    if not form.validate_on_submit():
        status = 400 if request.method == "POST" else 200
        return render_template("auth/reset.html", form=form, email=user.email), status
    user = claim_email_token(session, token, RESET)
    if user is None:  # used a moment ago, in another tab
        session.rollback()
        return _link_gone("reset")
    user.set_password(form.new_password.data)
    user.email_verified_at = user.email_verified_at or utcnow()  # the mail reached them
    end_sessions(user)
    session.commit()
    announce_sessions_ended(user)
    if current_user.is_authenticated:
        end_this_session()
    flash("Your new password is set, and every session of the account has ended. Log in.")
    return redirect(url_for("auth.login"))


@bp.get("/verify/<token>")
def verify(token: str):
    """Confirm one's address from the mailed link."""
    session = db_session()
    user = claim_email_token(session, token, VERIFY)
    if user is None:
        session.rollback()
        return _link_gone("verify")
    user.email_verified_at = user.email_verified_at or utcnow()
    session.commit()
    flash("Your address is confirmed.")
    if current_user.is_authenticated:
        return redirect(url_for("chat.index"))
    return redirect(url_for("auth.login"))


@bp.post("/verify/send")
@login_required
@limiter.limit(_mail_limit, key_func=lambda: f"user:{current_user.id}", scope="mail-again")
def send_again():
    """A new confirmation link, for the person logged in (the banner's button)."""
    user = db_session().get(User, current_user.id)
    if user.email_verified_at is None:
        send_address_confirmation(user)
        flash(f"We sent a new link to {user.email}.")
    return redirect(url_for("chat.index"))
