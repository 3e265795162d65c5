"""Log in, log out, sign up."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, current_app, flash, g, redirect, render_template, request, url_for
from flask_login import current_user, login_required
from sqlalchemy import select

from app.accounts.models import User, dummy_password_check, end_sessions, spend_a_password_hash
from app.accounts.service import AccountError, create_user
from app.error_codes import ErrorCode
from app.telemetry import metrics
from app.web import login_throttle
from app.web.errors import error_response
from app.web.extensions import limiter
from app.web.forms import ConfirmForm, LoginForm, SignupForm
from app.web.identity import client_address, db_session
from app.web.mailing import send_address_confirmation
from app.web.offload import off_the_loop
from app.web.session import end_this_session, start_session
from app.web.socket_access import announce_sessions_ended

bp = Blueprint("auth", __name__)

LOGIN_FAILED = "That email and password do not match an account."
EMAIL_TAKEN = "That email already has an account: log in with its password."


def _settings():
    return current_app.config["LOOPDESK"]


def _address_key() -> str:
    return f"address:{client_address()}"


def _login_failed(_response) -> bool:
    """Only a checked, wrong password counts as a failure (not a form missing its CSRF
    token, which anyone could send in the account's name for free)."""
    return bool(g.get("wrong_password"))


def _safe_next(target: str | None) -> str:
    """Only same-site paths: never bounce a fresh login to another host."""
    if not target:
        return url_for("chat.index")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return url_for("chat.index")
    return target


# Never one global counter, and no lock (docs/security.md#login): per client address (the
# real one behind TRUSTED_PROXIES) every attempt, and failures hard; per account a growing
# delay that holds back only the addresses that failed on it (app/web/login_throttle.py).
@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(
    lambda: _settings().rate_limit_login_address,
    key_func=_address_key,
    methods=["POST"],
    scope="login-address",
)
@limiter.limit(
    lambda: _settings().rate_limit_login_address_failures,
    key_func=_address_key,
    methods=["POST"],
    scope="login-address-failures",
    deduct_when=_login_failed,
)
def login():
    """The login form (GET) and logging in (POST), throttled per address and account."""
    form = LoginForm()
    if form.validate_on_submit():
        email = User.normalize_email(form.email.data)
        wait = login_throttle.seconds_to_wait(email, client_address())
        if wait:
            return _slowed_down(wait)
        user = db_session().scalar(select(User).where(User.email == email))
        # An argon2 check is a quarter of a second of CPU: off the serving loop.
        if user is None:
            off_the_loop(dummy_password_check, form.password.data)
        elif off_the_loop(user.check_password, form.password.data):
            login_throttle.record_success(email, client_address())
            start_session(user)
            if user.must_onboard:
                flash("Welcome to Loopdesk.")  # the first login after signing up
            return redirect(_safe_next(request.args.get("next")))
        g.wrong_password = True
        login_throttle.record_failure(email, client_address())
        form.password.errors.append(LOGIN_FAILED)
        return render_template("auth/login.html", form=form), 400
    status = 400 if request.method == "POST" else 200
    return render_template("auth/login.html", form=form), status


def _slowed_down(seconds: int):
    """This address failed on an account now being guessed at: it waits out the delay."""
    message = (
        "Too many failed logins for this account from this address. "
        f"Try again in {seconds} seconds."
    )
    back = (url_for("auth.login"), "Back to the login page")
    metrics.rate_limited("login_throttle")
    return error_response(
        429, ErrorCode.RATE_LIMITED, message, {"Retry-After": str(seconds)}, back=back
    )


@bp.route("/signup", methods=["GET", "POST"])
@limiter.limit(
    lambda: _settings().rate_limit_signup, key_func=_address_key, methods=["POST"], scope="signup"
)
def signup():
    """A new account is signed in at once (its first page is the welcome step). A taken
    email creates nothing and goes to the login page; a password is hashed either way, so
    the time taken does not tell (docs/security.md)."""
    if not _settings().open_signup:
        return render_template("auth/signup_closed.html"), 403
    form = SignupForm()
    if not form.validate_on_submit():
        status = 400 if request.method == "POST" else 200
        return render_template("auth/signup.html", form=form), status
    session = db_session()
    try:
        # Confirmed only by the mailed link (VERIFY_EMAIL), never by typing it here.
        user = create_user(session, form.email.data, form.password.data, verified=False)
    except AccountError:
        session.rollback()
        spend_a_password_hash(form.password.data)  # what creating the account costs
        flash(EMAIL_TAKEN)
        return redirect(url_for("auth.login"))
    user.needs_onboarding = True  # only self-made accounts get the welcome step
    session.commit()
    if _settings().verify_email:
        send_address_confirmation(user)
    start_session(user)
    flash("Welcome to Loopdesk.")
    return redirect(url_for("chat.index"))


@bp.route("/logout", methods=["GET", "POST"])
@login_required
def logout():
    """Ends every session of the account: the cookie is signed, not stored, so a copy of
    it would otherwise keep working (docs/security.md)."""
    if request.method == "GET":
        return render_template("auth/logout.html", form=ConfirmForm())
    session = db_session()
    user = session.get(User, current_user.id)
    end_sessions(user)
    session.commit()
    announce_sessions_ended(user)
    end_this_session()
    return redirect(url_for("auth.login"))
