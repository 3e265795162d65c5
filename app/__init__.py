"""Loopdesk: the app factory."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask, request
from flask_login import current_user
from werkzeug.middleware.proxy_fix import ProxyFix

from app.chat.executor import make_executor
from app.config import PROJECT_ROOT, Settings, load_settings
from app.services import build_services, make_database
from app.web import identity
from app.web.extensions import csrf, limiter, login_manager, migrate, sock
from app.web.session import SessionInterface

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


def create_app(test_config: dict | None = None) -> Flask:
    """Build the app. `test_config` keys in lower case override settings; upper case keys
    go straight into Flask's config."""
    test_config = dict(test_config or {})
    flask_config = {k: test_config.pop(k) for k in list(test_config) if k.isupper()}
    settings = load_settings(overrides=test_config)

    app = Flask(
        __name__,
        instance_path=str(settings.instance_path),
        template_folder=str(PROJECT_ROOT / "templates"),
        static_folder=str(PROJECT_ROOT / "static"),
    )
    app.config.update(_flask_config(settings))
    app.config.update(flask_config)
    app.session_interface = SessionInterface()
    if settings.trusted_proxies:
        # The client's address, scheme and host as the trusted proxies saw them: rate
        # limits count real clients, and the socket's Origin check sees the public origin.
        hops = settings.trusted_proxies
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]  # Flask's documented way
            app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=hops
        )
    settings.instance_path.mkdir(parents=True, exist_ok=True)
    _init_tracing(settings)
    _init_services(app, settings)
    _init_extensions(app)
    _init_views(app)
    _init_templates(app, settings)
    return app


def _flask_config(settings: Settings) -> dict:
    return dict(
        SECRET_KEY=settings.secret_key,
        LOOPDESK=settings,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        # The cookie's own expiry; app.web.session also refuses a login older than this.
        PERMANENT_SESSION_LIFETIME=timedelta(days=settings.session_lifetime_days),
        REMEMBER_COOKIE_HTTPONLY=True,
        REMEMBER_COOKIE_SAMESITE="Lax",
        # CSRF is checked in a before_request hook so bearer-token scripts can skip it.
        WTF_CSRF_CHECK_DEFAULT=False,
        WTF_CSRF_TIME_LIMIT=None,
        # An upload plus its form fields; attachments themselves are capped by the setting.
        MAX_CONTENT_LENGTH=max(8 * 1024 * 1024, settings.attachment_max_bytes + 1024 * 1024),
        # Without Redis, counters in memory without a timer thread (app/web/limit_storage.py).
        RATELIMIT_STORAGE_URI=settings.redis_url or "loopdesk-memory://",
        # Off: flask-limiter would stamp every response of a limited route with its window's
        # Retry-After (also a 202, and over a 429 TOO_MANY_RUNS's few seconds); the 429
        # handler (app/web/errors.py) sets Retry-After where it means something.
        RATELIMIT_HEADERS_ENABLED=False,
        SOCK_SERVER_OPTIONS={"ping_interval": 25, "max_message_size": 64 * 1024},
    )


def _init_tracing(settings: Settings) -> None:
    from app.telemetry import tracing

    tracing.configure(
        exporter=settings.otel_traces_exporter,
        endpoint=settings.otel_exporter_otlp_endpoint,
        traces_endpoint=settings.otel_exporter_otlp_traces_endpoint,
        service_name=settings.otel_service_name,
        capture_content=settings.otel_capture_message_content,
    )


def _init_services(app: Flask, settings: Settings) -> None:
    database = make_database(settings)
    app.extensions["database"] = database
    services = build_services(settings, database=database)
    app.extensions["services"] = services
    app.extensions["executor"] = make_executor(services)
    _init_mail(app, settings)


def _init_mail(app: Flask, settings: Settings) -> None:
    """The mailer; without SMTP_URL its mails go to the log at INFO, which must then show
    (Flask's handler on the app's logger writes to stderr: what `make run` prints)."""
    import logging

    from app.mail.sender import Mailer

    app.extensions["mailer"] = Mailer(settings)
    mail_log = logging.getLogger("app.mail")
    if mail_log.level == logging.NOTSET:
        mail_log.setLevel(logging.INFO)
    app.logger  # noqa: B018  (creating it gives the "app" loggers Flask's handler)


def _init_extensions(app: Flask) -> None:
    migrate.init_app(
        app,
        db=app.extensions["database"],
        directory=str(PROJECT_ROOT / "migrations"),
        render_as_batch=True,
        compare_type=True,
    )
    csrf.init_app(app)
    _init_cors(app)
    limiter.init_app(app)
    sock.init_app(app)
    _init_login(app)


def _init_cors(app: Flask) -> None:
    """CORS_ORIGINS' pages may call the JSON API with a bearer token: its answers, and
    preflights for the Authorization header, name the origin. Never with credentials, so
    a session cookie is no use across origins (CSRF stays the same-origin pages' defence)."""
    origins = app.config["LOOPDESK"].cors_origins
    if not origins:
        return
    from flask_cors import CORS

    CORS(
        app,
        resources={r"/api/*": {"origins": list(origins)}},
        supports_credentials=False,
        allow_headers=["Authorization", "Content-Type"],
        expose_headers=["Retry-After", "Location"],
        max_age=600,
    )


def _init_views(app: Flask) -> None:
    """Routes, error handlers, commands and the request hooks."""
    from app.cli import register_commands
    from app.web import input_gate, log_redaction, request_spans
    from app.web.errors import register_error_handlers
    from app.web.scopes import check_token_scope

    request_spans.init_app(app)  # when tracing is on, a span around every other hook
    # Before the blueprints (their rules use its `int` converter) and before the CSRF
    # hook (which reads the form).
    input_gate.init_app(app)
    _register_blueprints(app)
    register_error_handlers(app)
    register_commands(app)
    app.teardown_appcontext(identity.close_db_session)
    app.before_request(_check_csrf)
    app.before_request(check_token_scope)
    app.after_request(_security_headers)
    log_redaction.install(app.logger)


def _init_templates(app: Flask, settings: Settings) -> None:
    from app.chat.models import ConversationStatus
    from app.chat.provenance import source_label
    from app.kinds import CardKind, CardStatus, OutputKind, RowKind
    from app.llm.errors import retry_text
    from app.web import times
    from app.web.markdown import render_markdown, render_message

    app.context_processor(lambda: {"settings": settings})
    app.jinja_env.filters["markdown"] = render_markdown
    app.jinja_env.filters["message_markdown"] = render_message
    app.jinja_env.filters["untrusted_source_label"] = source_label
    app.jinja_env.filters["retry_text"] = retry_text
    # The templates compare row kinds and statuses against these, not bare strings.
    app.jinja_env.globals.update(
        RowKind=RowKind,
        CardKind=CardKind,
        CardStatus=CardStatus,
        OutputKind=OutputKind,
        ConversationStatus=ConversationStatus,
    )
    times.register(app)


def _init_login(app: Flask) -> None:
    login_manager.init_app(app)
    login_manager.login_view = "auth.login"
    login_manager.login_message = "Please log in to continue."
    login_manager.user_loader(identity.load_user)
    login_manager.request_loader(identity.load_user_from_request)

    @login_manager.unauthorized_handler
    def _unauthorized():
        from flask import redirect, url_for

        from app.error_codes import ErrorCode
        from app.web.errors import error_response

        if identity.wants_json() or identity.bearer_token():
            return error_response(
                401, ErrorCode.UNAUTHORIZED, "Log in or send a valid bearer token."
            )
        return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))


def _add_pages_by_subject() -> None:
    """The admin and chat blueprints' pages by subject: importing these modules adds theirs
    to those blueprints (before they are registered)."""
    from app.web import (
        admin_guidelines,  # noqa: F401
        admin_projects,  # noqa: F401
        chat_lists,  # noqa: F401
        context_api,  # noqa: F401
        feedback,  # noqa: F401
        mcp_pages,  # noqa: F401
        model_pages,  # noqa: F401
        model_picker,  # noqa: F401
        presets_pages,  # noqa: F401
        queue_api,  # noqa: F401
        queue_pages,  # noqa: F401
    )


def _register_blueprints(app: Flask) -> None:
    _add_pages_by_subject()
    from app.web import (
        admin,
        api,
        auth,
        cards,
        chat,
        email_links,
        export,
        mcp_api,
        mcp_server,
        memory_api,
        metrics_route,
        models_api,
        openapi,
        presets_api,
        projects_api,
        projects_pages,
        projects_settings,
        schedules,
        search,
        settings_page,
        share,
        sockets,
        workspace,
        workspace_api,
    )

    for module in (
        auth,
        email_links,
        chat,
        cards,
        workspace,
        settings_page,
        admin,
        api,
        memory_api,
        mcp_api,
        models_api,
        presets_api,
        mcp_server,
        search,
        export,
        share,
        schedules,
        workspace_api,
        projects_api,
        projects_pages,
        projects_settings,
        openapi,
        metrics_route,
        sockets,
    ):
        app.register_blueprint(module.bp)


def _check_csrf() -> None:
    if request.method not in {"POST", "PUT", "PATCH", "DELETE"} or identity.bearer_token():
        return
    # An anonymous API call has no session to protect: login_required answers it with 401.
    if request.path.startswith("/api/") and not current_user.is_authenticated:
        return
    if request.path == "/mcp":
        return  # it takes only a bearer token: a browser's cookie is refused there (401)
    if request.endpoint == "share.continue_chat":
        _check_csrf_token_only()
        return
    csrf.protect()


def _check_csrf_token_only() -> None:
    """The shared page sends no Referer (`Referrer-Policy: no-referrer`: its address holds
    the link's token), which Flask-WTF's HTTPS check would refuse; its form's CSRF token,
    tied to the session, is checked as everywhere."""
    from flask_wtf.csrf import CSRFError, validate_csrf
    from wtforms import ValidationError

    token = request.form.get("csrf_token") or request.headers.get("X-CSRFToken")
    try:
        validate_csrf(token)
    except ValidationError as refused:
        raise CSRFError(refused.args[0]) from None


def _security_headers(response):
    response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "DENY")
    return response
