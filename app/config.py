"""Settings: the one module that reads the environment (and `.env`)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from dotenv import load_dotenv

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INSTANCE = PROJECT_ROOT / "instance"

DEFAULT_HOST_MODEL = "claude-sonnet-5-5"
DEFAULT_FAST_MODEL = "claude-haiku-5-5"
DEFAULT_IMAGE_MODEL = "gpt-image-1"
# The built-in demo model's name: what host requests, run logs and usage name while it
# answers (app/llm/demo.py reports the model a request names).
DEMO_MODEL_NAME = "loopdesk-demo"


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _number(env: dict, name: str, default, kind, what: str):
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError as exc:
        raise ValueError(f"setting {name} must be {what}, got {raw!r}") from exc


def _int(env: dict, name: str, default: int) -> int:
    return _number(env, name, default, int, "a whole number")


def _float(env: dict, name: str, default: float) -> float:
    return _number(env, name, default, float, "a number of seconds")


def _optional_bool(value: str | None) -> bool | None:
    return None if value is None or value.strip() == "" else _bool(value, False)


def _public_url(raw: str | None) -> str | None:
    """`https://chat.example.com` (no path): where people reach the app."""
    if not raw or not raw.strip():
        return None
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"PUBLIC_URL must be like https://chat.example.com, got {raw!r}")
    return raw.strip().rstrip("/")


def _weights(raw: str | None) -> dict[str, int]:
    """`claude-haiku-5-5=1,claude-sonnet-5-5=2` → {model: credits}."""
    weights = {}
    for item in (raw or "").split(","):
        if not item.strip():
            continue
        name, _, value = item.partition("=")
        try:
            weights[name.strip()] = int(value)
        except ValueError as exc:
            raise ValueError(f"MODEL_CREDIT_WEIGHTS: {item!r} is not model=whole-number") from exc
    return weights


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
class Settings:
    instance_path: Path
    database_url: str
    secret_key: str
    host: str = "127.0.0.1"
    port: int = 5000
    # Connections one process keeps to a database server (not SQLite).
    database_pool_size: int = 20
    redis_url: str | None = None
    # Namespaces every Redis key and channel (deployments or tests sharing one Redis).
    redis_prefix: str = "loopdesk:"
    run_executor: str = "thread"
    run_threads: int = 32
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    model_provider: str = "demo"
    host_model: str = DEFAULT_HOST_MODEL
    fast_model: str = DEFAULT_FAST_MODEL
    thinking_budget: int = 0
    context_window_tokens: int = 200_000
    max_iterations: int = 10
    history_message_cap: int = 40
    rate_limit_messages: str = "40 per 10 minutes"
    heartbeat_seconds: float = 15
    stale_seconds: float = 90
    stream_idle_seconds: float = 90
    max_run_seconds: float = 1200
    # Runs one person may have in flight at once, across all their conversations.
    max_concurrent_runs: int = 3
    # Credits a run costs before its billable tool calls; models not listed cost 2.
    model_credit_weights: dict = field(default_factory=dict)
    default_credit_weight: int = 2
    # Structured run logs (model calls, tool calls, frames, errors) for `flask chat-logs`.
    run_logs: bool = True
    # The fast model names a chat after its first exchange (app/chat/titles.py).
    chat_titles: bool = True
    worker_threads: int = 256
    # `gevent`: runs are greenlets (hundreds per process); `threads`: an OS thread each.
    worker_pool: str = "gevent"
    # What `make run` serves with: `gunicorn` (one gevent worker) or `flask` (threaded).
    make_run_server: str = "gunicorn"
    # The Dramatiq queue runs go to (separate deployments sharing a Redis use different ones).
    run_queue: str = "loopdesk-runs"
    fetch_allow_hosts: tuple[str, ...] = ()
    # Media generation: an OpenAI-compatible images API when the URL is set (else the
    # local draft renderer); no video provider exists yet.
    image_provider_url: str | None = None
    image_provider_key: str | None = None
    image_model: str = DEFAULT_IMAGE_MODEL
    video_provider_url: str | None = None
    open_signup: bool = True
    # Sessions (docs/security.md): how long a login lasts, whether the cookie is marked
    # Secure (None: when PUBLIC_URL is https, or the request came over HTTPS), and the
    # address people reach the app at (the socket's Origin is compared with it).
    session_lifetime_days: int = 14
    session_cookie_secure: bool | None = None
    public_url: str | None = None
    # Proxies in front of the app that set X-Forwarded-For/-Proto/-Host/-Port: how many
    # hops to trust (0: none; the client is the connection's address).
    trusted_proxies: int = 0
    # Login: failed attempts per account (from anywhere) and attempts per client address.
    rate_limit_login_account: str = "30 per hour"
    rate_limit_login_address: str = "20 per minute"
    rate_limit_signup: str = "10 per hour"
    max_message_chars: int = 100_000
    attachment_max_bytes: int = 5_000_000
    # JSON bodies and socket messages nested deeper than this answer 400.
    max_json_depth: int = 32
    # Model calls and background work started from a request (onboarding, memory
    # instruct/import, settings import), per person, in flask-limiter's notation.
    rate_limit_model_work: str = "20 per 10 minutes"
    # Onboarding starters written at once per process; more wait in its queue.
    onboarding_threads: int = 4
    # PDF text extraction (a separate process): seconds, and decoded page content bytes
    # (a stream shared by many pages counts once per page) before it is refused.
    pdf_extract_seconds: float = 15
    pdf_max_content_bytes: int = 8_000_000
    # Sockets one person may hold open at once (per process), and catch-up rows per
    # request and requests per minute on one socket.
    max_sockets_per_person: int = 20
    socket_catch_up_rows: int = 200
    socket_catch_ups_per_minute: int = 30
    extra: dict = field(default_factory=dict)

    @property
    def uses_demo_model(self) -> bool:
        return self.model_provider == "demo"

    @property
    def host_model_name(self) -> str:
        """The model that answers host calls: HOST_MODEL, or the demo model when it is the
        one answering (whatever HOST_MODEL says)."""
        return DEMO_MODEL_NAME if self.uses_demo_model else self.host_model


def load_settings(overrides: dict | None = None, env: dict | None = None) -> Settings:
    """Build settings from the environment; `overrides` (tests) win over it."""
    if env is None:
        load_dotenv(PROJECT_ROOT / ".env", override=False)
        env = dict(os.environ)
    overrides = dict(overrides or {})
    instance_path = Path(
        overrides.pop("instance_path", env.get("INSTANCE_PATH") or DEFAULT_INSTANCE)
    )
    database_url = env.get("DATABASE_URL") or f"sqlite:///{instance_path / 'loopdesk.db'}"
    api_key = env.get("ANTHROPIC_API_KEY") or None
    base_url = env.get("ANTHROPIC_BASE_URL") or None
    provider = env.get("MODEL_PROVIDER") or ("anthropic" if (api_key or base_url) else "demo")
    if provider not in {"anthropic", "demo"}:
        raise ValueError(f"MODEL_PROVIDER must be 'anthropic' or 'demo', got {provider!r}")
    if (env.get("WORKER_POOL") or "gevent") not in {"gevent", "threads"}:
        raise ValueError(f"WORKER_POOL must be 'gevent' or 'threads', got {env['WORKER_POOL']!r}")
    if (env.get("MAKE_RUN_SERVER") or "gunicorn") not in {"gunicorn", "flask"}:
        raise ValueError(
            f"MAKE_RUN_SERVER must be 'gunicorn' or 'flask', got {env['MAKE_RUN_SERVER']!r}"
        )
    executor = env.get("RUN_EXECUTOR") or "thread"
    if executor not in {"thread", "dramatiq"}:
        raise ValueError(f"RUN_EXECUTOR must be 'thread' or 'dramatiq', got {executor!r}")
    values = dict(
        instance_path=instance_path,
        database_url=database_url,
        secret_key=env.get("SECRET_KEY") or "",
        host=env.get("HOST") or "127.0.0.1",
        port=_int(env, "PORT", 5000),
        database_pool_size=_int(env, "DATABASE_POOL_SIZE", 20),
        redis_url=env.get("REDIS_URL") or None,
        redis_prefix=env.get("REDIS_PREFIX") or "loopdesk:",
        run_executor=executor,
        run_threads=_int(env, "RUN_THREADS", 32),
        anthropic_api_key=api_key,
        anthropic_base_url=base_url,
        model_provider=provider,
        host_model=env.get("HOST_MODEL") or DEFAULT_HOST_MODEL,
        fast_model=env.get("FAST_MODEL") or DEFAULT_FAST_MODEL,
        thinking_budget=_int(env, "THINKING_BUDGET", 0),
        context_window_tokens=_int(env, "CONTEXT_WINDOW_TOKENS", 200_000),
        max_iterations=_int(env, "MAX_ITERATIONS", 10),
        history_message_cap=_int(env, "HISTORY_MESSAGE_CAP", 40),
        rate_limit_messages=env.get("RATE_LIMIT_MESSAGES") or "40 per 10 minutes",
        heartbeat_seconds=_float(env, "HEARTBEAT_SECONDS", 15),
        stale_seconds=_float(env, "STALE_SECONDS", 90),
        stream_idle_seconds=_float(env, "STREAM_IDLE_SECONDS", 90),
        max_run_seconds=_float(env, "MAX_RUN_SECONDS", 1200),
        max_concurrent_runs=_int(env, "MAX_CONCURRENT_RUNS", 3),
        model_credit_weights=_weights(env.get("MODEL_CREDIT_WEIGHTS")),
        run_logs=_bool(env.get("RUN_LOGS"), True),
        chat_titles=_bool(env.get("CHAT_TITLES"), True),
        worker_threads=_int(env, "WORKER_THREADS", 256),
        worker_pool=env.get("WORKER_POOL") or "gevent",
        make_run_server=env.get("MAKE_RUN_SERVER") or "gunicorn",
        run_queue=env.get("RUN_QUEUE") or "loopdesk-runs",
        fetch_allow_hosts=tuple(
            h.strip() for h in (env.get("FETCH_ALLOW_HOSTS") or "").split(",") if h.strip()
        ),
        image_provider_url=env.get("IMAGE_PROVIDER_URL") or None,
        image_provider_key=env.get("IMAGE_PROVIDER_KEY") or None,
        image_model=env.get("IMAGE_MODEL") or DEFAULT_IMAGE_MODEL,
        video_provider_url=env.get("VIDEO_PROVIDER_URL") or None,
        open_signup=_bool(env.get("OPEN_SIGNUP"), True),
        session_lifetime_days=_int(env, "SESSION_LIFETIME_DAYS", 14),
        session_cookie_secure=_optional_bool(env.get("SESSION_COOKIE_SECURE")),
        public_url=_public_url(env.get("PUBLIC_URL")),
        trusted_proxies=_int(env, "TRUSTED_PROXIES", 0),
        rate_limit_login_account=env.get("RATE_LIMIT_LOGIN_ACCOUNT") or "30 per hour",
        rate_limit_login_address=env.get("RATE_LIMIT_LOGIN_ADDRESS") or "20 per minute",
        rate_limit_signup=env.get("RATE_LIMIT_SIGNUP") or "10 per hour",
        max_message_chars=_int(env, "MAX_MESSAGE_CHARS", 100_000),
        attachment_max_bytes=_int(env, "ATTACHMENT_MAX_BYTES", 5_000_000),
        max_json_depth=_int(env, "MAX_JSON_DEPTH", 32),
        rate_limit_model_work=env.get("RATE_LIMIT_MODEL_WORK") or "20 per 10 minutes",
        onboarding_threads=_int(env, "ONBOARDING_THREADS", 4),
        pdf_extract_seconds=_float(env, "PDF_EXTRACT_SECONDS", 15),
        pdf_max_content_bytes=_int(env, "PDF_MAX_CONTENT_BYTES", 8_000_000),
        max_sockets_per_person=_int(env, "MAX_SOCKETS_PER_PERSON", 20),
        socket_catch_up_rows=_int(env, "SOCKET_CATCH_UP_ROWS", 200),
        socket_catch_ups_per_minute=_int(env, "SOCKET_CATCH_UPS_PER_MINUTE", 30),
    )
    values.update(overrides)
    if values["session_lifetime_days"] < 1:
        raise ValueError("SESSION_LIFETIME_DAYS must be at least 1")
    if values["trusted_proxies"] < 0:
        raise ValueError("TRUSTED_PROXIES must be 0 or more")
    if not values["secret_key"]:
        values["secret_key"] = _secret_key(Path(values["instance_path"]))
    return Settings(**values)


@dataclass(frozen=True)
class Documented:
    """One environment variable as docs/reference.md lists it (app/reference.py). The
    default is read from `Settings` itself unless the field has none (`default_text`)."""

    env: str
    meaning: str
    field: str | None = None
    default_text: str | None = None


# Every variable `load_settings` (and gunicorn.conf.py) reads; a test runs load_settings on
# a recording environment and fails on one that is missing here.
DOCUMENTED_SETTINGS: tuple[Documented, ...] = (
    Documented("HOST", "where `make run` serves", field="host"),
    Documented("PORT", "where `make run` serves", field="port"),
    Documented(
        "DATABASE_URL",
        "any SQLAlchemy URL; PostgreSQL for scale",
        default_text="SQLite file in `instance/`",
    ),
    Documented(
        "REDIS_URL",
        "enables Redis pub/sub, Redis rate-limit storage, the Dramatiq broker",
        field="redis_url",
    ),
    Documented("RUN_EXECUTOR", "`thread` or `dramatiq`", field="run_executor"),
    Documented(
        "SECRET_KEY", "session signing", default_text="generated into `instance/` on first run"
    ),
    Documented(
        "ANTHROPIC_API_KEY",
        "the model endpoint; any server speaking the Anthropic Messages API",
        field="anthropic_api_key",
    ),
    Documented(
        "ANTHROPIC_BASE_URL",
        "the model endpoint; any server speaking the Anthropic Messages API",
        field="anthropic_base_url",
    ),
    Documented(
        "MODEL_PROVIDER",
        "`anthropic` or `demo`",
        default_text="`anthropic` when a key or base URL is set, else `demo`",
    ),
    Documented(
        "HOST_MODEL", "host loop and agents; memory reconcile, summaries", field="host_model"
    ),
    Documented(
        "FAST_MODEL", "host loop and agents; memory reconcile, summaries", field="fast_model"
    ),
    Documented(
        "THINKING_BUDGET", "extended-thinking budget for host calls", field="thinking_budget"
    ),
    Documented("CONTEXT_WINDOW_TOKENS", "the model's window", field="context_window_tokens"),
    Documented(
        "MAX_ITERATIONS", "model calls per run before the wrap-up call", field="max_iterations"
    ),
    Documented(
        "HISTORY_MESSAGE_CAP",
        "rows sent to the model, after merging same-role neighbours",
        field="history_message_cap",
    ),
    Documented(
        "RATE_LIMIT_MESSAGES",
        "per user, shared by every way of sending: the loop route, the composer, `/chats/start`, Regenerate, Edit, and a card answered on the page",
        field="rate_limit_messages",
    ),
    Documented(
        "RATE_LIMIT_MODEL_WORK",
        "per user, shared by the other routes that call a model or start work: `POST /api/memory/instruct`, `POST /api/memory/import`, `POST /settings/import`, and `POST /welcome` (except Skip); 429 `RATE_LIMITED` with `Retry-After`",
        field="rate_limit_model_work",
    ),
    Documented(
        "ONBOARDING_THREADS",
        "threads per process writing onboarding starters; at most 8 times as many wait, one job per account (a `/welcome` post while one is queued or running starts none; with the queue full the person gets the default starters)",
        field="onboarding_threads",
    ),
    Documented(
        "MAX_JSON_DEPTH",
        "JSON bodies and socket messages nested deeper answer 400 (`INVALID_JSON`; socket: an `error` frame)",
        field="max_json_depth",
    ),
    Documented(
        "PDF_EXTRACT_SECONDS",
        "a PDF's text is extracted in a child process killed after these seconds, and refused before parsing when its pages' decoded content streams add up to more bytes (a stream shared by pages counts once per page); either answers 422 `ATTACHMENT_REFUSED` \"… is too complex to read\". At most 200 pages are read",
        field="pdf_extract_seconds",
    ),
    Documented(
        "PDF_MAX_CONTENT_BYTES",
        "a PDF's text is extracted in a child process killed after these seconds, and refused before parsing when its pages' decoded content streams add up to more bytes (a stream shared by pages counts once per page); either answers 422 `ATTACHMENT_REFUSED` \"… is too complex to read\". At most 200 pages are read",
        field="pdf_max_content_bytes",
    ),
    Documented(
        "MAX_SOCKETS_PER_PERSON",
        'sockets one person may hold open in one web process; the next is closed with 1013 and the reason "Too many open sockets: at most N per person."',
        field="max_sockets_per_person",
    ),
    Documented(
        "SOCKET_CATCH_UP_ROWS",
        "rows one catch-up request answers (then a `more` frame), and catch-up requests one socket may make in any minute (past it: an `error` frame `RATE_LIMITED`)",
        field="socket_catch_up_rows",
    ),
    Documented(
        "SOCKET_CATCH_UPS_PER_MINUTE",
        "rows one catch-up request answers (then a `more` frame), and catch-up requests one socket may make in any minute (past it: an `error` frame `RATE_LIMITED`)",
        field="socket_catch_ups_per_minute",
    ),
    Documented("HEARTBEAT_SECONDS", "liveness", field="heartbeat_seconds"),
    Documented("STALE_SECONDS", "liveness", field="stale_seconds"),
    Documented("STREAM_IDLE_SECONDS", "liveness", field="stream_idle_seconds"),
    Documented("MAX_RUN_SECONDS", "liveness", field="max_run_seconds"),
    Documented(
        "FETCH_ALLOW_HOSTS",
        "hosts that `fetch_url` may reach although they resolve to private or loopback addresses (tests only)",
        default_text="unset",
    ),
    Documented(
        "INSTANCE_PATH",
        "where the SQLite file and the generated secret live",
        default_text="`instance/`",
    ),
    Documented(
        "OPEN_SIGNUP", "whether anyone can create an account at `/signup`", field="open_signup"
    ),
    Documented(
        "SESSION_LIFETIME_DAYS",
        "how long a login lasts, from the login (docs/security.md)",
        field="session_lifetime_days",
    ),
    Documented(
        "SESSION_COOKIE_SECURE",
        "`true`/`false`; unset: Secure when `PUBLIC_URL` is https or the request came over HTTPS",
        default_text="unset",
    ),
    Documented(
        "PUBLIC_URL",
        "where people reach the app (`https://chat.example.com`); the socket's `Origin` must be it (unset: the request's own origin)",
        field="public_url",
    ),
    Documented(
        "TRUSTED_PROXIES",
        "proxies in front whose `X-Forwarded-For/-Proto/-Host/-Port` count (werkzeug's ProxyFix, this many hops)",
        default_text="`0`",
    ),
    Documented(
        "RATE_LIMIT_LOGIN_ADDRESS",
        "login attempts per client address",
        field="rate_limit_login_address",
    ),
    Documented(
        "RATE_LIMIT_LOGIN_ACCOUNT",
        "failed login attempts per account, from any address",
        field="rate_limit_login_account",
    ),
    Documented("RATE_LIMIT_SIGNUP", "sign-ups per client address", field="rate_limit_signup"),
    Documented(
        "MAX_MESSAGE_CHARS",
        "the longest message a person can send (413 above it)",
        field="max_message_chars",
    ),
    Documented("ATTACHMENT_MAX_BYTES", "the largest attachment", field="attachment_max_bytes"),
    Documented(
        "RUN_THREADS", "the web process's run thread pool (`thread` executor)", field="run_threads"
    ),
    Documented(
        "WORKER_THREADS",
        "runs one `flask worker` executes at once; `gevent` or `threads`",
        field="worker_threads",
    ),
    Documented(
        "WORKER_POOL",
        "runs one `flask worker` executes at once; `gevent` or `threads`",
        field="worker_pool",
    ),
    Documented(
        "MAKE_RUN_SERVER",
        "what `make run` serves with: `gunicorn` (one gevent worker, `gunicorn.conf.py`, as in production; Flask's server where gevent cannot be imported) or `flask` (Flask's threaded server)",
        field="make_run_server",
    ),
    Documented("RUN_QUEUE", "the Dramatiq queue", field="run_queue"),
    Documented("REDIS_PREFIX", "namespaces Redis keys and channels", field="redis_prefix"),
    Documented(
        "DATABASE_POOL_SIZE",
        "connections each process keeps to PostgreSQL",
        field="database_pool_size",
    ),
    Documented(
        "MAX_CONCURRENT_RUNS",
        "runs one person may have in flight across their chats (429 `TOO_MANY_RUNS`)",
        field="max_concurrent_runs",
    ),
    Documented(
        "MODEL_CREDIT_WEIGHTS",
        "credits a run costs per host model (`name=weight,...`; unlisted: 2); the demo model costs nothing",
        default_text="unset",
    ),
    Documented("RUN_LOGS", "record structured run logs", field="run_logs"),
    Documented(
        "CHAT_TITLES",
        "the fast model names a chat after its first exchange (`submit_title`), unless the person named it",
        field="chat_titles",
    ),
    Documented(
        "IMAGE_PROVIDER_URL",
        "an OpenAI-compatible images endpoint; without one, labelled local drafts",
        field="image_provider_url",
    ),
    Documented(
        "IMAGE_PROVIDER_KEY",
        "an OpenAI-compatible images endpoint; without one, labelled local drafts",
        field="image_provider_key",
    ),
    Documented(
        "IMAGE_MODEL",
        "an OpenAI-compatible images endpoint; without one, labelled local drafts",
        field="image_model",
    ),
    Documented(
        "VIDEO_PROVIDER_URL",
        "video is not set up without it (`generate_video` says so)",
        field="video_provider_url",
    ),
    Documented("GUNICORN_BIND", "`gunicorn.conf.py`", default_text="`HOST:PORT`"),
    Documented("GUNICORN_WORKER_CLASS", "`gunicorn.conf.py`", default_text="`gevent`"),
    Documented("WEB_CONCURRENCY", "`gunicorn.conf.py`", default_text="`2`"),
    Documented("GUNICORN_WORKER_CONNECTIONS", "`gunicorn.conf.py`", default_text="`1000`"),
    Documented("GUNICORN_THREADS", "`gunicorn.conf.py`", default_text="`64`"),
    Documented("GUNICORN_ACCESS_LOG", "`gunicorn.conf.py`", default_text="off"),
)


def documented_default(setting: Documented) -> str:
    if setting.default_text is not None:
        return setting.default_text
    value = getattr(Settings.__dataclass_fields__[setting.field], "default", None)
    return (
        "unset"
        if value in (None, "", ())
        else f"`{str(value).lower() if isinstance(value, bool) else value}`"
    )
