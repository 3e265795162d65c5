"""Settings: the one module that reads the environment (and `.env`).

Each setting is declared once, as a field of `Settings` (a pydantic-settings model): its
default, the environment variable it is read from (its alias), how that text is read (its
type), and what it means (its description). `load_settings` and the table in
docs/reference.md (`DOCUMENTED_SETTINGS`, app/reference.py) are derived from those fields."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from dotenv import load_dotenv
from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from app.setting_types import (
    Flag,
    Hosts,
    OptionalFlag,
    Origins,
    PublicUrl,
    Seconds,
    SmtpUrl,
    Telemetry,
    Weights,
    Whole,
    setting,
)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INSTANCE = PROJECT_ROOT / "instance"

DEFAULT_HOST_MODEL = "claude-sonnet-5-5"
DEFAULT_FAST_MODEL = "claude-haiku-5-5"
DEFAULT_IMAGE_MODEL = "gpt-image-1"
# The built-in demo model's name: what host requests, run logs and usage name while it
# answers (app/llm/demo/engine.py reports the model a request names).
DEMO_MODEL_NAME = "loopdesk-demo"


_SERVES = "where `make run` serves"
_ENDPOINT = "the model endpoint; any server speaking the Anthropic Messages API"
_MODELS = "host loop and agents; memory reconcile, summaries"
_PDF = (
    "a PDF's text is extracted in a child process killed after these seconds, and refused "
    "before parsing when its pages' decoded content streams add up to more bytes (a stream "
    'shared by pages counts once per page); either answers 422 `ATTACHMENT_REFUSED` "… is '
    'too complex to read". At most 200 pages are read'
)
_CATCH_UP = (
    "rows one catch-up request answers (then a `more` frame), and catch-up requests one "
    "socket may make in any minute (past it: an `error` frame `RATE_LIMITED`)"
)
_METRICS = (
    "`host:port` where Prometheus metrics are served without authentication (started once, "
    "in gunicorn's master or Flask's server); empty: only `GET /metrics`, which needs an "
    "admin's token or session"
)
_ADDRESS = r"^(|\[?[^\s\]]*\]?:\d{1,5})$"
_WORKER = "runs one `flask worker` executes at once; `gevent` or `threads`"
_IMAGES = "an OpenAI-compatible images endpoint; without one, labelled local drafts"

_SMTP_URL = (
    "the mail server: `smtp://user:password@host:587` (STARTTLS when the server offers it; a "
    "password is sent only over TLS or to a loopback host), `smtps://host:465` (TLS from "
    "the start), `smtp://host:25` (no login); the password is never logged or shown. Unset: "
    "every mail, links included, is written to the log at INFO"
)
_MAIL_FROM = "the sender address of every mail"
_MAIL_FROM_DEFAULT = "`loopdesk@` the host of `PUBLIC_URL`, else `loopdesk@localhost`"
_MAIL_TIMEOUT = (
    "how long each step of talking to the mail server may take (connecting, each command); "
    "mails are sent off the request, and a failure is logged"
)
_VERIFY_EMAIL = (
    "accounts made at `/signup` must confirm their address (a mailed link, 24 h) before they "
    "can start a reply (403 `EMAIL_UNCONFIRMED`): until then every page says so and offers "
    "to send the link again; accounts made by an admin or `flask create-user`, and those "
    "from before, count as confirmed"
)
_RATE_LIMIT_MAIL = (
    "mails asked for per client address (`/forgot`, a confirmation link sent again), and "
    "apart per address asked for at `/forgot` (known or not: the answer is the same)"
)


class Settings(Telemetry):
    """Every setting; `load_settings` builds it (overrides, then the environment)."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid", validate_by_name=True)

    host: str = setting("127.0.0.1", "HOST", _SERVES)
    port: Whole = setting(5000, "PORT", _SERVES)
    # Empty: the SQLite file in instance/ (load_settings fills it in).
    database_url: str = setting(
        "",
        "DATABASE_URL",
        "any SQLAlchemy URL; PostgreSQL for scale",
        default_text="SQLite file in `instance/`",
    )
    redis_url: str | None = setting(
        None,
        "REDIS_URL",
        "enables Redis pub/sub, Redis rate-limit storage, the Dramatiq broker",
    )
    run_executor: Literal["thread", "dramatiq"] = setting(
        "thread", "RUN_EXECUTOR", "`thread` or `dramatiq`"
    )
    secret_key: str = setting(
        "", "SECRET_KEY", "session signing", default_text="generated into `instance/` on first run"
    )
    anthropic_api_key: str | None = setting(None, "ANTHROPIC_API_KEY", _ENDPOINT)
    anthropic_base_url: str | None = setting(None, "ANTHROPIC_BASE_URL", _ENDPOINT)
    # Unset: `anthropic` when a key or base URL is set (load_settings decides).
    model_provider: Literal["anthropic", "demo"] = setting(
        "demo",
        "MODEL_PROVIDER",
        "`anthropic` or `demo`",
        default_text="`anthropic` when a key or base URL is set, else `demo`",
    )
    host_model: str = setting(DEFAULT_HOST_MODEL, "HOST_MODEL", _MODELS)
    fast_model: str = setting(DEFAULT_FAST_MODEL, "FAST_MODEL", _MODELS)
    thinking_budget: Whole = setting(
        0, "THINKING_BUDGET", "extended-thinking budget for host calls"
    )
    context_window_tokens: Whole = setting(200_000, "CONTEXT_WINDOW_TOKENS", "the model's window")
    max_iterations: Whole = setting(
        10, "MAX_ITERATIONS", "model calls per run before the wrap-up call"
    )
    history_message_cap: Whole = setting(
        40, "HISTORY_MESSAGE_CAP", "rows sent to the model, after merging same-role neighbours"
    )
    rate_limit_messages: str = setting(
        "40 per 10 minutes",
        "RATE_LIMIT_MESSAGES",
        "per user, shared by every way of sending: the loop route, the composer, "
        "`/chats/start`, Regenerate, Edit, and a card answered on the page",
    )
    # Model calls and background work started from a request, per person, in
    # flask-limiter's notation.
    rate_limit_model_work: str = setting(
        "20 per 10 minutes",
        "RATE_LIMIT_MODEL_WORK",
        "per user, shared by the other routes that call a model or start work: "
        "`POST /api/memory/instruct`, `POST /api/memory/import`, `POST /settings/import`, "
        "and `POST /welcome` (except Skip); 429 `RATE_LIMITED` with `Retry-After`",
    )
    # Onboarding starters written at once per process; more wait in its queue.
    onboarding_threads: Whole = setting(
        4,
        "ONBOARDING_THREADS",
        "threads per process writing onboarding starters; at most 8 times as many wait, one "
        "job per account (a `/welcome` post while one is queued or running starts none; with "
        "the queue full the person gets the default starters)",
    )
    max_json_depth: Whole = setting(
        32,
        "MAX_JSON_DEPTH",
        "JSON bodies and socket messages nested deeper answer 400 (`INVALID_JSON`; socket: an "
        "`error` frame)",
    )
    # PDF text extraction (a separate process): seconds, and decoded page content bytes.
    pdf_extract_seconds: Seconds = setting(15, "PDF_EXTRACT_SECONDS", _PDF)
    pdf_max_content_bytes: Whole = setting(8_000_000, "PDF_MAX_CONTENT_BYTES", _PDF)
    max_sockets_per_person: Whole = setting(
        20,
        "MAX_SOCKETS_PER_PERSON",
        "sockets one person may hold open in one web process; the next is closed with 1013 "
        'and the reason "Too many open sockets: at most N per person."',
    )
    socket_catch_up_rows: Whole = setting(200, "SOCKET_CATCH_UP_ROWS", _CATCH_UP)
    socket_catch_ups_per_minute: Whole = setting(30, "SOCKET_CATCH_UPS_PER_MINUTE", _CATCH_UP)
    socket_catch_up_bytes_per_minute: Whole = setting(
        4_000_000,
        "SOCKET_CATCH_UP_BYTES_PER_MINUTE",
        "bytes of catch-up answers one person's sockets in one web process may receive in "
        "any minute; past it a catch-up answers an `error` frame `RATE_LIMITED` (an answer "
        "begun within it is sent whole: at most `SOCKET_CATCH_UP_ROWS` rows)",
    )
    heartbeat_seconds: Seconds = setting(15, "HEARTBEAT_SECONDS", "liveness")
    stale_seconds: Seconds = setting(90, "STALE_SECONDS", "liveness")
    stream_idle_seconds: Seconds = setting(90, "STREAM_IDLE_SECONDS", "liveness")
    max_run_seconds: Seconds = setting(1200, "MAX_RUN_SECONDS", "liveness")
    metrics_address: str = setting("", "METRICS_ADDRESS", _METRICS, pattern=_ADDRESS)
    web_search: Literal["auto", "on", "off"] = setting(
        "auto",
        "WEB_SEARCH",
        "the provider's web search server tool beside `fetch_url`: `auto` offers it on the "
        "Anthropic API (no ANTHROPIC_BASE_URL), `on` on any model server, `off` never; its "
        "results taint the chat and its citations show as links under the answer",
    )
    mcp_timeout_seconds: Seconds = setting(
        10,
        "MCP_TIMEOUT_SECONDS",
        "how long one call to an MCP server (listing its tools, or one tool call) may take; "
        "past it the model reads an `is_error` result",
    )
    mcp_secret_key: str = setting(
        "",
        "MCP_SECRET_KEY",
        "the key MCP servers' headers are sealed with at rest",
        default_text="derived from SECRET_KEY",
    )
    fetch_allow_hosts: Hosts = setting(
        (),
        "FETCH_ALLOW_HOSTS",
        "hosts that `fetch_url` may reach although they resolve to private or loopback "
        "addresses (tests only)",
    )
    cors_origins: Origins = setting(
        (),
        "CORS_ORIGINS",
        "browser origins (comma-separated, like `https://app.example.com`) whose pages may "
        "call `/api/*` with an API token; cookies never count across origins (empty: none)",
    )
    instance_path: Path = setting(
        DEFAULT_INSTANCE,
        "INSTANCE_PATH",
        "where the SQLite file and the generated secret live",
        default_text="`instance/`",
    )
    open_signup: Flag = setting(
        True, "OPEN_SIGNUP", "whether anyone can create an account at `/signup`"
    )
    # Sessions (docs/security.md): how long a login lasts, whether the cookie is marked
    # Secure, and the address people reach the app at (the socket's Origin is compared
    # with it).
    session_lifetime_days: Whole = setting(
        14,
        "SESSION_LIFETIME_DAYS",
        "how long a login lasts, from the login (docs/security.md)",
        ge=1,
    )
    session_cookie_secure: OptionalFlag = setting(
        None,
        "SESSION_COOKIE_SECURE",
        "`true`/`false`; unset: Secure when `PUBLIC_URL` is https or the request came over HTTPS",
    )
    public_url: PublicUrl = setting(
        None,
        "PUBLIC_URL",
        "where people reach the app (`https://chat.example.com`); the socket's `Origin` must "
        "be it (unset: the request's own origin)",
    )
    # Proxies in front of the app: how many hops to trust (0: none; the client is the
    # connection's address).
    trusted_proxies: Whole = setting(
        0,
        "TRUSTED_PROXIES",
        "proxies in front whose `X-Forwarded-For/-Proto/-Host/-Port` count (werkzeug's "
        "ProxyFix, this many hops)",
        ge=0,
    )
    rate_limit_login_address: str = setting(
        "20 per minute", "RATE_LIMIT_LOGIN_ADDRESS", "login attempts per client address"
    )
    rate_limit_login_address_failures: str = setting(
        "10 per hour",
        "RATE_LIMIT_LOGIN_ADDRESS_FAILURES",
        "failed login attempts per client address, on any accounts (then 429 to every "
        "login from it)",
    )
    rate_limit_login_account: str = setting(
        "5 per hour",
        "RATE_LIMIT_LOGIN_ACCOUNT",
        "failed login attempts per account, from any address: the last of them and each "
        "after sets a growing delay (15 s, doubling) for the addresses that failed on it; "
        "no lock (docs/security.md)",
    )
    login_delay_max_seconds: Whole = setting(
        900,
        "LOGIN_DELAY_MAX_SECONDS",
        "the longest delay an account's failed logins set (docs/security.md)",
    )
    rate_limit_signup: str = setting(
        "10 per hour", "RATE_LIMIT_SIGNUP", "sign-ups per client address"
    )
    rate_limit_mail: str = setting("5 per hour", "RATE_LIMIT_MAIL", _RATE_LIMIT_MAIL)
    max_message_chars: Whole = setting(
        100_000, "MAX_MESSAGE_CHARS", "the longest message a person can send (413 above it)"
    )
    attachment_max_bytes: Whole = setting(
        5_000_000, "ATTACHMENT_MAX_BYTES", "the largest attachment"
    )
    # "Download all my data": the zip is built in a thread, off the serving loop.
    rate_limit_data_downloads: str = setting(
        "4 per hour",
        "RATE_LIMIT_DATA_DOWNLOADS",
        "per user, shared by `GET /settings/data.zip` and `GET /api/export`; 429 "
        "`RATE_LIMITED` with `Retry-After`",
    )
    data_download_max_bytes: Whole = setting(
        500_000_000,
        "DATA_DOWNLOAD_MAX_BYTES",
        'the largest "Download all my data" zip (its files and chats, before compression); '
        "a person's data over it answers 413 `DOWNLOAD_TOO_LARGE`",
    )
    run_threads: Whole = setting(
        32, "RUN_THREADS", "the web process's run thread pool (`thread` executor)"
    )
    worker_threads: Whole = setting(256, "WORKER_THREADS", _WORKER)
    # `gevent`: runs are greenlets (hundreds per process); `threads`: an OS thread each.
    worker_pool: Literal["gevent", "threads"] = setting("gevent", "WORKER_POOL", _WORKER)
    scheduler: Literal["web", "apart"] = setting(
        "web",
        "SCHEDULER",
        "who sends scheduled messages: `web` (each serving process runs a scheduler; a "
        "database claim sends each tick once) or `apart` (only `flask scheduler` does)",
    )
    make_run_server: Literal["gunicorn", "flask"] = setting(
        "gunicorn",
        "MAKE_RUN_SERVER",
        "what `make run` serves with: `gunicorn` (one gevent worker, `gunicorn.conf.py`, as in production; Flask's server where gevent cannot be imported) or `flask` (Flask's threaded server)",
    )
    # Separate deployments sharing a Redis use different queues.
    run_queue: str = setting("loopdesk-runs", "RUN_QUEUE", "the Dramatiq queue")
    # Namespaces every Redis key and channel (deployments or tests sharing one Redis).
    redis_prefix: str = setting("loopdesk:", "REDIS_PREFIX", "namespaces Redis keys and channels")
    database_pool_size: Whole = setting(
        20, "DATABASE_POOL_SIZE", "connections each process keeps to PostgreSQL"
    )
    max_concurrent_runs: Whole = setting(
        3,
        "MAX_CONCURRENT_RUNS",
        "runs one person may have in flight across their chats (429 `TOO_MANY_RUNS`)",
    )
    # Credits a run costs before its billable tool calls; models not listed cost
    # default_credit_weight.
    model_credit_weights: Weights = setting(
        {},
        "MODEL_CREDIT_WEIGHTS",
        "credits a run costs per host model (`name=weight,...`; unlisted: 2); the demo model "
        "costs nothing",
    )
    default_credit_weight: int = 2
    run_logs: Flag = setting(True, "RUN_LOGS", "record structured run logs")
    chat_titles: Flag = setting(
        True,
        "CHAT_TITLES",
        "the fast model names a chat after its first exchange (`submit_title`), unless the "
        "person named it",
    )
    # Email (app/mail/): password resets, address confirmation and invitations.
    smtp_url: SmtpUrl = setting(None, "SMTP_URL", _SMTP_URL, repr=False)
    mail_from: str = setting("", "MAIL_FROM", _MAIL_FROM, default_text=_MAIL_FROM_DEFAULT)
    mail_timeout_seconds: Seconds = setting(10, "MAIL_TIMEOUT_SECONDS", _MAIL_TIMEOUT)
    verify_email: Flag = setting(False, "VERIFY_EMAIL", _VERIFY_EMAIL)
    # Media generation: an OpenAI-compatible images API when the URL is set (else the
    # local draft renderer); no video provider exists yet.
    image_provider_url: str | None = setting(None, "IMAGE_PROVIDER_URL", _IMAGES)
    image_provider_key: str | None = setting(None, "IMAGE_PROVIDER_KEY", _IMAGES)
    image_model: str = setting(DEFAULT_IMAGE_MODEL, "IMAGE_MODEL", _IMAGES)
    video_provider_url: str | None = setting(
        None, "VIDEO_PROVIDER_URL", "video is not set up without it (`generate_video` says so)"
    )

    @property
    def uses_demo_model(self) -> bool:
        return self.model_provider == "demo"

    @property
    def offers_web_search(self) -> bool:
        """Whether the host's requests offer the provider's web search (WEB_SEARCH)."""
        if self.web_search == "auto":
            return not self.uses_demo_model and not self.anthropic_base_url
        return self.web_search == "on"

    @property
    def host_model_name(self) -> str:
        """The model that answers host calls: HOST_MODEL, or the demo model when it is the
        one answering (whatever HOST_MODEL says)."""
        return DEMO_MODEL_NAME if self.uses_demo_model else self.host_model

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Overrides (by field name) win over the environment that load_settings reads;
        no other source (load_settings loads `.env` into the environment)."""
        return init_settings, _Environment(settings_cls, _ENVIRONMENT.get(os.environ))


# The environment load_settings is reading: os.environ, or a test's dict.
_ENVIRONMENT: ContextVar[Mapping[str, str]] = ContextVar("environment")


class _Environment(PydanticBaseSettingsSource):
    """Each setting's variable, asked of `environment` by its exact name; empty is unset.
    (pydantic-settings' EnvSettingsSource reads only os.environ, would take a field's name
    too, `host` for HOST, and reads tuples and dicts as JSON.)"""

    def __init__(self, settings_cls: type[BaseSettings], environment: Mapping[str, str]):
        super().__init__(settings_cls)
        self.environment = environment

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        name = field.validation_alias
        if not isinstance(name, str):
            return None, field_name, False  # not read from the environment
        return self.environment.get(name) or None, name, False

    def __call__(self) -> dict[str, Any]:
        found = {}
        for field_name, settings_field in self.settings_cls.model_fields.items():
            value, name, _ = self.get_field_value(settings_field, field_name)
            if value is not None:
                found[name] = value
        return found


def load_settings(overrides: dict | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Build settings from the environment; `overrides` (tests; by field name) win over it."""
    if env is None:
        load_dotenv(PROJECT_ROOT / ".env", override=False)
        env = os.environ
    reading = _ENVIRONMENT.set(env)
    try:
        settings = Settings(**(overrides or {}))
    except ValidationError as exc:
        raise ValueError("; ".join(_refusal(error) for error in exc.errors())) from None
    finally:
        _ENVIRONMENT.reset(reading)
    return settings.model_copy(update=_derived(settings))


def _refusal(error: ErrorDetails) -> str:
    """One line naming the variable: `setting PORT must be a whole number, got 'x'`."""
    name = ".".join(str(part) for part in error["loc"])
    if error["type"] == "value_error":  # a reader's words (above)
        return f"setting {name} {error.get('ctx', {}).get('error')}"
    if error["msg"].startswith("Input should be"):  # pydantic's words: a type, choice or bound
        said = error["msg"].replace("Input should be", "must be", 1)
        return f"setting {name} {said}, got {error['input']!r}"
    return f"setting {name}: {error['msg']}"


def _derived(settings: Settings) -> dict[str, Any]:
    """The defaults that depend on other settings (docs/reference.md says which)."""
    derived: dict[str, Any] = {}
    if not settings.database_url:
        derived["database_url"] = f"sqlite:///{settings.instance_path / 'loopdesk.db'}"
    if "model_provider" not in settings.model_fields_set:
        configured = settings.anthropic_api_key or settings.anthropic_base_url
        derived["model_provider"] = "anthropic" if configured else "demo"
    if not settings.mail_from:
        derived["mail_from"] = (
            f"loopdesk@{urlsplit(settings.public_url or '').hostname or 'localhost'}"
        )
    if not settings.secret_key:
        derived["secret_key"] = _secret_key(settings.instance_path)
    return derived


def _secret_key(instance_path: Path) -> str:
    """Generate a key into instance/ on first run so sessions survive restarts."""
    key_file = instance_path / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    instance_path.mkdir(parents=True, exist_ok=True)
    key = secrets.token_hex(32)
    key_file.write_text(key)
    key_file.chmod(0o600)
    return key
