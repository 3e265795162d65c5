"""Errors answered as JSON for scripts and the API, as HTML for pages."""

from __future__ import annotations

import math
import time

from flask import Flask, current_app, jsonify, make_response, render_template, request
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import (
    HTTPException,
    MethodNotAllowed,
    NotFound,
    RequestEntityTooLarge,
)

from app.error_codes import ErrorCode, for_status
from app.telemetry import metrics
from app.web.identity import wants_json


class ApiError(Exception):
    """An error with a stable code, raised anywhere in a request: `status` is the HTTP
    status, `code` one of app/error_codes.py (by default the status's own), as on
    TurnRejected."""

    def __init__(
        self,
        status: int,
        message: str,
        code: ErrorCode | None = None,
        headers=None,
        field=None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code or for_status(status)
        self.message = message
        self.extra_headers = headers or {}
        self.field = field  # the input at fault, named in JSON errors


def error_response(status: int, code: ErrorCode, message: str, headers=None, field=None, back=None):
    """`back`: (href, label) of the error page's way on; by default the person's chats,
    or the login page for a visitor who is not logged in (templates/error.html)."""
    if request.headers.get("HX-Request") == "true" and not request.path.startswith("/api/"):
        # An htmx request swaps a fragment: say what went wrong in the page's banner.
        response = make_response(render_template("chat/_banner.html", message=message), status)
        # HX-Reselect: a form that swaps part of what comes back (hx-select) takes the banner.
        response.headers.update(
            {"HX-Retarget": "#banner", "HX-Reswap": "outerHTML", "HX-Reselect": "#banner"}
        )
    elif wants_json():
        body = {"code": code, "message": message}
        if field is not None:
            body["field"] = field
        response = jsonify({"error": body})
    else:
        response = make_response(
            render_template("error.html", status=status, message=message, back=back)
        )
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def _retry_after() -> int:
    """Seconds until the limit resets, from flask-limiter's view of this request."""
    from app.web.extensions import limiter

    limit = limiter.current_limit
    if limit is None:
        return 60
    # window[0] is when the window resets, exactly (reset_at rounds it up a second).
    return max(1, math.ceil(limit.window[0] - time.time()))


def _limited_what() -> tuple[str, tuple[str, str] | None]:
    """What was limited, in the person's words, and the way on from the page that says so
    (None: the default, their chats or the login page)."""
    from flask import url_for

    from app.web.extensions import DATA_DOWNLOAD_SCOPE, MODEL_WORK_SCOPE, limiter

    limit = limiter.current_limit
    key = limit.key if limit is not None else ""
    endpoint = request.endpoint or ""
    if endpoint == "auth.signup":
        return "Too many sign-ups from this address.", (url_for("auth.login"), "Log in")
    if endpoint == "auth.login":
        return "Too many login attempts from this address.", (
            url_for("auth.login"),
            "Back to the login page",
        )
    if endpoint == "settings.change_password":
        return "Too many password changes.", (url_for("settings.page"), "Back to your settings")
    if DATA_DOWNLOAD_SCOPE in key:
        return "Too many downloads of all your data.", (
            url_for("settings.page"),
            "Back to your settings",
        )
    if MODEL_WORK_SCOPE in key:
        return "Too many requests that call the model.", None
    if "messages" in key:
        return "Too many messages.", None
    return "Too many requests.", None


def _wait_text(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} seconds"
    return f"{round(seconds / 60)} minutes"


def _too_large_message() -> str:
    """What werkzeug's 413 (a body over MAX_CONTENT_LENGTH) means, in the person's words."""
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    if limit and (request.content_length or 0) > limit:
        size = f"{limit / (1024 * 1024):.1f}".removesuffix(".0")
        return f"The request is too large: at most {size} MB can be sent at once."
    return "The request is too large."


def _some_method_takes_the_path(error: MethodNotAllowed) -> bool:
    """Werkzeug answers 405 when a rule of another method fits the path's shape, before
    that rule's converters have read it: `/api/offers/<int>` with an id past the database's
    INTEGER would be 405 for GET and 404 for DELETE. The path is there when a rule of one
    of the methods it names takes it."""
    adapter = current_app.url_map.bind_to_environ(request.environ)
    for method in error.valid_methods or ():
        try:
            adapter.match(method=method)
        except (NotFound, MethodNotAllowed):
            continue
        except HTTPException:
            return True  # a redirect (a trailing slash): the path is there
        return True
    return False


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(CSRFError)
    def _csrf(error: CSRFError):
        return error_response(400, ErrorCode.CSRF_FAILED, error.description)

    @app.errorhandler(ApiError)
    def _api(error: ApiError):
        return error_response(
            error.status, error.code, error.message, error.extra_headers, error.field
        )

    @app.errorhandler(429)
    def _rate_limited(error):
        # flask-limiter's limits, by the route refused (its limit's name, when shared).
        metrics.rate_limited(f"limit:{request.endpoint or 'other'}")
        retry_after = _retry_after()
        what, back = _limited_what()
        message = f"{what} Try again in {_wait_text(retry_after)}."
        return error_response(
            429, ErrorCode.RATE_LIMITED, message, {"Retry-After": str(retry_after)}, back=back
        )

    @app.errorhandler(HTTPException)
    def _http(error: HTTPException):
        status = error.code or 500
        if isinstance(error, MethodNotAllowed) and not _some_method_takes_the_path(error):
            status = 404  # an id too large for the database is absent, whatever the method
        headers = dict(error.get_headers()) if status in (405, 429) else {}
        headers.pop("Content-Type", None)
        message = error.description or error.name
        if status == 404:
            message = "Not found."
        elif isinstance(error, RequestEntityTooLarge):
            message = _too_large_message()
        return error_response(status, for_status(status), message, headers)

    @app.errorhandler(Exception)
    def _unexpected(error: Exception):
        app.logger.exception("unhandled error")
        return error_response(500, ErrorCode.INTERNAL, "Something went wrong on our side.")
