"""Settings: the one module that reads the environment (and `.env`).

Each setting is declared once, as a field of `Settings`: its default, the environment
variable it is read from, how that text is read, and what it means. `load_settings` and
the table in docs/reference.md (`DOCUMENTED_SETTINGS`, app/reference.py) are derived from
those fields."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dotenv import load_dotenv

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INSTANCE = PROJECT_ROOT / "instance"

DEFAULT_HOST_MODEL = "claude-sonnet-5-5"
DEFAULT_FAST_MODEL = "claude-haiku-5-5"
DEFAULT_IMAGE_MODEL = "gpt-image-1"
# The built-in demo model's name: what host requests, run logs and usage name while it
# answers (app/llm/demo/engine.py reports the model a request names).
DEMO_MODEL_NAME = "loopdesk-demo"


# -- reading one variable's text -------------------------------------------------------


def _bool(raw: str) -> bool:
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _optional_bool(raw: str) -> bool | None:
    return None if raw.strip() == "" else _bool(raw)


def _whole(raw: str) -> int:
    return int(raw)


def _seconds(raw: str) -> float:
    return float(raw)


# What a parse error says the value must be.
_MUST_BE = {_whole: "a whole number", _seconds: "a number of seconds"}


def _public_url(raw: str) -> str | None:
    """`https://chat.example.com` (no path): where people reach the app."""
    if not raw.strip():
        return None
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"PUBLIC_URL must be like https://chat.example.com, got {raw!r}")
    return raw.strip().rstrip("/")


def _weights(raw: str) -> dict[str, int]:
    """`claude-haiku-5-5=1,claude-sonnet-5-5=2` → {model: credits}."""
    weights = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        name, _, value = item.partition("=")
        try:
            weights[name.strip()] = int(value)
        except ValueError as exc:
            raise ValueError(f"MODEL_CREDIT_WEIGHTS: {item!r} is not model=whole-number") from exc
    return weights


def _hosts(raw: str) -> tuple[str, ...]:
    return tuple(h.strip() for h in raw.split(",") if h.strip())


_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?$")


def _origins(raw: str) -> tuple[str, ...]:
    """`https://app.example.com,http://localhost:3000`: exact origins (no wildcard: a
    token in any page's hands is the person's whole account)."""
    origins = _hosts(raw)
    for origin in origins:
        if not _ORIGIN.match(origin):
            raise ValueError(
                f"CORS_ORIGINS: {origin!r} is not an origin like https://app.example.com"
            )
    return tuple(origin.lower() for origin in origins)


@dataclass(frozen=True)
class Variable:
    """Where a setting comes from: its environment variable, how its text is read (an
    empty or missing variable keeps the default), and what it means (docs/reference.md)."""

    env: str
    meaning: str
    parse: Callable[[str], Any] = str
    choices: tuple[str, ...] = ()
    # For a default that is not a plain value (derived, generated, or a path).
    default_text: str | None = None

    def read(self, env: dict, default: Any) -> Any:
        raw = env.get(self.env)
        if raw is None or raw == "":
            return default
        if self.choices and raw not in self.choices:
            allowed = " or ".join(f"'{choice}'" for choice in self.choices)
            raise ValueError(f"{self.env} must be {allowed}, got {raw!r}")
        try:
            return self.parse(raw)
        except ValueError as exc:
            if self.parse not in _MUST_BE:
                raise
            raise ValueError(
                f"setting {self.env} must be {_MUST_BE[self.parse]}, got {raw!r}"
            ) from exc


def setting(
    default: Any, env: str, meaning: str, parse: Callable[[str], Any] | None = None, **more
):
    """A field of Settings read from `env`; read as the default's type unless `parse`."""
    if parse is None:
        parse = {bool: _bool, int: _whole, float: _seconds}.get(type(default), str)
    variable = Variable(env, meaning, parse or str, **more)
    if isinstance(default, dict):
        return field(default_factory=dict, metadata={"variable": variable})
    return field(default=default, metadata={"variable": variable})


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
_WORKER = "runs one `flask worker` executes at once; `gevent` or `threads`"
_IMAGES = "an OpenAI-compatible images endpoint; without one, labelled local drafts"


@dataclass(frozen=True)
class Settings:
    host: str = setting("127.0.0.1", "HOST", _SERVES)
    port: int = setting(5000, "PORT", _SERVES)
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
    run_executor: str = setting(
        "thread", "RUN_EXECUTOR", "`thread` or `dramatiq`", choices=("thread", "dramatiq")
    )
    secret_key: str = setting(
        "", "SECRET_KEY", "session signing", default_text="generated into `instance/` on first run"
    )
    anthropic_api_key: str | None = setting(None, "ANTHROPIC_API_KEY", _ENDPOINT)
    anthropic_base_url: str | None = setting(None, "ANTHROPIC_BASE_URL", _ENDPOINT)
    # Unset: `anthropic` when a key or base URL is set (load_settings decides).
    model_provider: str = setting(
        "demo",
        "MODEL_PROVIDER",
        "`anthropic` or `demo`",
        choices=("anthropic", "demo"),
        default_text="`anthropic` when a key or base URL is set, else `demo`",
    )
    host_model: str = setting(DEFAULT_HOST_MODEL, "HOST_MODEL", _MODELS)
    fast_model: str = setting(DEFAULT_FAST_MODEL, "FAST_MODEL", _MODELS)
    thinking_budget: int = setting(0, "THINKING_BUDGET", "extended-thinking budget for host calls")
    context_window_tokens: int = setting(200_000, "CONTEXT_WINDOW_TOKENS", "the model's window")
    max_iterations: int = setting(
        10, "MAX_ITERATIONS", "model calls per run before the wrap-up call"
    )
    history_message_cap: int = setting(
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
    onboarding_threads: int = setting(
        4,
        "ONBOARDING_THREADS",
        "threads per process writing onboarding starters; at most 8 times as many wait, one "
        "job per account (a `/welcome` post while one is queued or running starts none; with "
        "the queue full the person gets the default starters)",
    )
    max_json_depth: int = setting(
        32,
        "MAX_JSON_DEPTH",
        "JSON bodies and socket messages nested deeper answer 400 (`INVALID_JSON`; socket: an "
        "`error` frame)",
    )
    # PDF text extraction (a separate process): seconds, and decoded page content bytes.
    pdf_extract_seconds: float = setting(15, "PDF_EXTRACT_SECONDS", _PDF, _seconds)
    pdf_max_content_bytes: int = setting(8_000_000, "PDF_MAX_CONTENT_BYTES", _PDF)
    max_sockets_per_person: int = setting(
        20,
        "MAX_SOCKETS_PER_PERSON",
        "sockets one person may hold open in one web process; the next is closed with 1013 "
        'and the reason "Too many open sockets: at most N per person."',
    )
    socket_catch_up_rows: int = setting(200, "SOCKET_CATCH_UP_ROWS", _CATCH_UP)
    socket_catch_ups_per_minute: int = setting(30, "SOCKET_CATCH_UPS_PER_MINUTE", _CATCH_UP)
    socket_catch_up_bytes_per_minute: int = setting(
        4_000_000,
        "SOCKET_CATCH_UP_BYTES_PER_MINUTE",
        "bytes of catch-up answers one person's sockets in one web process may receive in "
        "any minute; past it a catch-up answers an `error` frame `RATE_LIMITED` (an answer "
        "begun within it is sent whole: at most `SOCKET_CATCH_UP_ROWS` rows)",
    )
    heartbeat_seconds: float = setting(15, "HEARTBEAT_SECONDS", "liveness", _seconds)
    stale_seconds: float = setting(90, "STALE_SECONDS", "liveness", _seconds)
    stream_idle_seconds: float = setting(90, "STREAM_IDLE_SECONDS", "liveness", _seconds)
    max_run_seconds: float = setting(1200, "MAX_RUN_SECONDS", "liveness", _seconds)
    fetch_allow_hosts: tuple[str, ...] = setting(
        (),
        "FETCH_ALLOW_HOSTS",
        "hosts that `fetch_url` may reach although they resolve to private or loopback "
        "addresses (tests only)",
        _hosts,
    )
    cors_origins: tuple[str, ...] = setting(
        (),
        "CORS_ORIGINS",
        "browser origins (comma-separated, like `https://app.example.com`) whose pages may "
        "call `/api/*` with an API token; cookies never count across origins (empty: none)",
        _origins,
    )
    instance_path: Path = setting(
        DEFAULT_INSTANCE,
        "INSTANCE_PATH",
        "where the SQLite file and the generated secret live",
        Path,
        default_text="`instance/`",
    )
    open_signup: bool = setting(
        True, "OPEN_SIGNUP", "whether anyone can create an account at `/signup`"
    )
    # Sessions (docs/security.md): how long a login lasts, whether the cookie is marked
    # Secure, and the address people reach the app at (the socket's Origin is compared
    # with it).
    session_lifetime_days: int = setting(
        14, "SESSION_LIFETIME_DAYS", "how long a login lasts, from the login (docs/security.md)"
    )
    session_cookie_secure: bool | None = setting(
        None,
        "SESSION_COOKIE_SECURE",
        "`true`/`false`; unset: Secure when `PUBLIC_URL` is https or the request came over HTTPS",
        _optional_bool,
    )
    public_url: str | None = setting(
        None,
        "PUBLIC_URL",
        "where people reach the app (`https://chat.example.com`); the socket's `Origin` must "
        "be it (unset: the request's own origin)",
        _public_url,
    )
    # Proxies in front of the app: how many hops to trust (0: none; the client is the
    # connection's address).
    trusted_proxies: int = setting(
        0,
        "TRUSTED_PROXIES",
        "proxies in front whose `X-Forwarded-For/-Proto/-Host/-Port` count (werkzeug's "
        "ProxyFix, this many hops)",
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
    login_delay_max_seconds: int = setting(
        900,
        "LOGIN_DELAY_MAX_SECONDS",
        "the longest delay an account's failed logins set (docs/security.md)",
    )
    rate_limit_signup: str = setting(
        "10 per hour", "RATE_LIMIT_SIGNUP", "sign-ups per client address"
    )
    max_message_chars: int = setting(
        100_000, "MAX_MESSAGE_CHARS", "the longest message a person can send (413 above it)"
    )
    attachment_max_bytes: int = setting(5_000_000, "ATTACHMENT_MAX_BYTES", "the largest attachment")
    # "Download all my data": the zip is built in a thread, off the serving loop.
    rate_limit_data_downloads: str = setting(
        "4 per hour",
        "RATE_LIMIT_DATA_DOWNLOADS",
        "per user, shared by `GET /settings/data.zip` and `GET /api/export`; 429 "
        "`RATE_LIMITED` with `Retry-After`",
    )
    data_download_max_bytes: int = setting(
        500_000_000,
        "DATA_DOWNLOAD_MAX_BYTES",
        'the largest "Download all my data" zip (its files and chats, before compression); '
        "a person's data over it answers 413 `DOWNLOAD_TOO_LARGE`",
    )
    run_threads: int = setting(
        32, "RUN_THREADS", "the web process's run thread pool (`thread` executor)"
    )
    worker_threads: int = setting(256, "WORKER_THREADS", _WORKER)
    # `gevent`: runs are greenlets (hundreds per process); `threads`: an OS thread each.
    worker_pool: str = setting("gevent", "WORKER_POOL", _WORKER, choices=("gevent", "threads"))
    make_run_server: str = setting(
        "gunicorn",
        "MAKE_RUN_SERVER",
        "what `make run` serves with: `gunicorn` (one gevent worker, `gunicorn.conf.py`, as in production; Flask's server where gevent cannot be imported) or `flask` (Flask's threaded server)",
        choices=("gunicorn", "flask"),
    )
    # Separate deployments sharing a Redis use different queues.
    run_queue: str = setting("loopdesk-runs", "RUN_QUEUE", "the Dramatiq queue")
    # Namespaces every Redis key and channel (deployments or tests sharing one Redis).
    redis_prefix: str = setting("loopdesk:", "REDIS_PREFIX", "namespaces Redis keys and channels")
    database_pool_size: int = setting(
        20, "DATABASE_POOL_SIZE", "connections each process keeps to PostgreSQL"
    )
    max_concurrent_runs: int = setting(
        3,
        "MAX_CONCURRENT_RUNS",
        "runs one person may have in flight across their chats (429 `TOO_MANY_RUNS`)",
    )
    # Credits a run costs before its billable tool calls; models not listed cost
    # default_credit_weight.
    model_credit_weights: dict = setting(
        {},
        "MODEL_CREDIT_WEIGHTS",
        "credits a run costs per host model (`name=weight,...`; unlisted: 2); the demo model "
        "costs nothing",
        _weights,
    )
    default_credit_weight: int = 2
    run_logs: bool = setting(True, "RUN_LOGS", "record structured run logs")
    chat_titles: bool = setting(
        True,
        "CHAT_TITLES",
        "the fast model names a chat after its first exchange (`submit_title`), unless the "
        "person named it",
    )
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
    def host_model_name(self) -> str:
        """The model that answers host calls: HOST_MODEL, or the demo model when it is the
        one answering (whatever HOST_MODEL says)."""
        return DEMO_MODEL_NAME if self.uses_demo_model else self.host_model


def _variables() -> list[tuple[Field, Variable]]:
    return [(f, f.metadata["variable"]) for f in fields(Settings) if "variable" in f.metadata]


def _default(settings_field: Field) -> Any:
    if settings_field.default_factory is not MISSING:
        return settings_field.default_factory()
    return settings_field.default


def load_settings(overrides: dict | None = None, env: dict | None = None) -> Settings:
    """Build settings from the environment; `overrides` (tests) win over it."""
    if env is None:
        load_dotenv(PROJECT_ROOT / ".env", override=False)
        env = dict(os.environ)
    overrides = dict(overrides or {})
    values = {f.name: variable.read(env, _default(f)) for f, variable in _variables()}
    if "instance_path" in overrides:
        values["instance_path"] = Path(overrides.pop("instance_path"))
    if not values["database_url"]:
        values["database_url"] = f"sqlite:///{values['instance_path'] / 'loopdesk.db'}"
    if not env.get("MODEL_PROVIDER"):
        configured = values["anthropic_api_key"] or values["anthropic_base_url"]
        values["model_provider"] = "anthropic" if configured else "demo"
    values.update(overrides)
    if values["session_lifetime_days"] < 1:
        raise ValueError("SESSION_LIFETIME_DAYS must be at least 1")
    if values["trusted_proxies"] < 0:
        raise ValueError("TRUSTED_PROXIES must be 0 or more")
    if not values["secret_key"]:
        values["secret_key"] = _secret_key(Path(values["instance_path"]))
    return Settings(**values)


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


@dataclass(frozen=True)
class Documented:
    """One environment variable as docs/reference.md lists it (app/reference.py)."""

    env: str
    meaning: str
    default_text: str


def _documented(settings_field: Field, variable: Variable) -> Documented:
    if variable.default_text is not None:
        return Documented(variable.env, variable.meaning, variable.default_text)
    value = _default(settings_field)
    if value is None or value == "" or value == () or value == {}:
        return Documented(variable.env, variable.meaning, "unset")
    shown = str(value).lower() if isinstance(value, bool) else value
    return Documented(variable.env, variable.meaning, f"`{shown}`")


# Read by gunicorn.conf.py, not by load_settings.
_GUNICORN = "`gunicorn.conf.py`"
GUNICORN_SETTINGS = (
    Documented("GUNICORN_BIND", _GUNICORN, "`HOST:PORT`"),
    Documented("GUNICORN_WORKER_CLASS", _GUNICORN, "`gevent`"),
    Documented("WEB_CONCURRENCY", _GUNICORN, "`2`"),
    Documented("GUNICORN_WORKER_CONNECTIONS", _GUNICORN, "`1000`"),
    Documented("GUNICORN_THREADS", _GUNICORN, "`64`"),
    Documented("GUNICORN_ACCESS_LOG", _GUNICORN, "off"),
)

# Every variable `load_settings` and gunicorn.conf.py read; a test runs load_settings on a
# recording environment and fails on one that is missing here.
DOCUMENTED_SETTINGS: tuple[Documented, ...] = (
    *(_documented(f, variable) for f, variable in _variables()),
    *GUNICORN_SETTINGS,
)
