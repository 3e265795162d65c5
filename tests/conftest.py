"""Fixtures: an app per test with its own database (a SQLite file, or a fresh PostgreSQL
schema when DATABASE_URL names PostgreSQL), a client, and helpers to log in."""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlalchemy import create_engine, make_url, text

from app import create_app
from app.models import Base
from tests.factories import AuthActions, logged_in_driver

pytest_plugins = ["tests.fake_model"]

SERVICE_DATABASE_URL = os.environ.get("DATABASE_URL", "")
SERVICE_REDIS_URL = os.environ.get("REDIS_URL", "")
# The rate limiter's key prefix for every app this process builds: one per process (an
# xdist worker, or the only one), so that workers sharing a Redis count apart.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
RATE_LIMIT_PREFIX = f"test-{WORKER}-{uuid.uuid4().hex[:12]}"


@pytest.hookimpl(trylast=True)  # after pytest-timeout has read its setting
def pytest_configure(config):
    """Cheap password hashing in tests; production keeps argon2's default cost. The limit
    pytest-timeout puts on each test stretches with every wait (LOOPDESK_TEST_TIME_SCALE)."""
    from argon2 import PasswordHasher

    import app.accounts.models as account_models
    from tests.waiting import time_scale

    account_models._hasher = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
    if getattr(config, "_env_timeout", None):
        config._env_timeout *= time_scale()


def pytest_sessionstart(session):
    """When the suite is pointed at services, they must answer: missing is a failure."""
    if SERVICE_DATABASE_URL.startswith("postgresql"):
        engine = create_engine(SERVICE_DATABASE_URL)
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
    if SERVICE_REDIS_URL:
        import redis

        redis.Redis.from_url(SERVICE_REDIS_URL).ping()


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """Rate-limit counters kept in Redis would leak from one test into the next: the
    limiter is one object per process and keeps the key prefix of its first app, so every
    app of this process counts under RATE_LIMIT_PREFIX. Start each test with none of them,
    and leave the counters of other processes (another xdist worker's test) alone."""
    if SERVICE_REDIS_URL:
        delete_keys(f"LIMITS:LIMITER/{RATE_LIMIT_PREFIX}/*")
        delete_keys(f"LIMITS:{RATE_LIMIT_PREFIX}/*")  # app/web/login_throttle.py's counters
    yield


@pytest.fixture
def redis_namespace():
    """A name no other test uses, for its Redis keys, channels and queues; whatever keys
    start with it are deleted after the test."""
    value = f"test-{uuid.uuid4().hex[:12]}"
    yield value
    if SERVICE_REDIS_URL:
        delete_keys(f"{value}*")


def delete_keys(pattern: str) -> None:
    """Delete the keys matching `pattern` on the suite's Redis (SCAN, never KEYS)."""
    import redis

    client = redis.Redis.from_url(SERVICE_REDIS_URL)
    keys = list(client.scan_iter(match=pattern, count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def database_url(tmp_path):
    if not SERVICE_DATABASE_URL.startswith("postgresql"):
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(SERVICE_DATABASE_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(SERVICE_DATABASE_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="session")
def sqlite_schema(tmp_path_factory):
    """A SQLite file holding the models' empty schema, made once per process by the app's
    own engine (its PRAGMAs, the search index's triggers): a test's database starts as a
    copy of it instead of running the same DDL again (a third of building a test's app)."""
    from app.db import make_engine

    path = tmp_path_factory.mktemp("schema") / "schema.db"
    engine = make_engine(f"sqlite:///{path}")
    Base.metadata.create_all(engine)
    engine.dispose()
    # Closing the last connection checkpoints the write-ahead log into the file.
    assert not path.with_name("schema.db-wal").exists()
    return path


def _copy_schema(schema, database_url) -> bool:
    """Start a new SQLite file as a copy of the empty schema; False for any other database."""
    url = make_url(str(database_url))
    path = url.database
    if url.get_backend_name() != "sqlite" or path in (None, "", ":memory:"):
        return False
    if os.path.exists(path):
        return False
    shutil.copyfile(schema, path)
    return True


class _NoModelHandler(BaseHTTPRequestHandler):
    """Every request refused at once as the Messages API refuses a bad one (400 is never
    retried): a run a test did not script ends in milliseconds, where a closed port cost
    the SDK's three retries with backoff (about 3 s, in every such test's teardown)."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        message = "No model in this test: use the fake_model fixture to script one."
        body = json.dumps(
            {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        ).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def no_model_url():
    """The model endpoint of an app whose test talks to no model."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoModelHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def make_app(tmp_path, database_url, sqlite_schema, no_model_url):
    """Build an app on this test's database; call again for a second, fresh process state."""
    apps = []
    # The test's own namespace on a shared Redis (hub channels and live state): ids repeat
    # from test to test. Every app of the test shares it, as the processes of one deployment.
    hub_prefix = f"test-{uuid.uuid4().hex[:12]}:"

    def build(create_schema: bool = True, **overrides):
        config = {
            "instance_path": tmp_path / "instance",
            "database_url": database_url,
            "secret_key": "test-secret",
            "TESTING": True,
            "RATELIMIT_KEY_PREFIX": RATE_LIMIT_PREFIX,
            # No test reaches a real model: the default endpoint refuses every request;
            # tests that talk to a model pass the fake model server's URL.
            "model_provider": "anthropic",
            "anthropic_base_url": no_model_url,
            "anthropic_api_key": "test-key",
            "redis_prefix": hub_prefix,
            # Naming a chat after its first run is one more fast-model request, which
            # scripted tests would have to answer: tests about titles turn it on.
            "chat_titles": False,
            # A stdio MCP server starts a Python program: on a loaded machine that can
            # take longer than the 10 s default. No test waits on this timeout firing.
            "mcp_timeout_seconds": 30,
        }
        config.update(overrides)
        first = create_schema and not apps
        copied = first and _copy_schema(sqlite_schema, config["database_url"])
        app = create_app(config)
        if first and not copied:
            Base.metadata.create_all(app.extensions["database"].engine)
        apps.append(app)
        return app

    yield build
    for app in apps:
        app.extensions["executor"].shutdown()
        app.extensions["services"].close()


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def app_on_fake_model(make_app, fake_model):
    """An app that talks to the fake model server (packages whose tests drive runs make
    it their `app`)."""
    return make_app(anthropic_base_url=fake_model.base_url)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def db(app):
    session = app.extensions["database"].session()
    yield session
    session.close()


@pytest.fixture
def auth(app, client):
    return AuthActions(app, client)


@pytest.fixture
def user(auth):
    """Ada, logged in."""
    user_id = auth.create()
    auth.login()
    return user_id


@pytest.fixture
def chat(app, auth):
    """Ada, logged in, driving the app's JSON API (tests/factories.py)."""
    return logged_in_driver(app, auth)


@pytest.fixture(scope="module")
def rogue():
    """A deliberately malicious MCP server of ours (tests/mcp/rogue_server.py), one per
    test module: its base URL (its endpoint is `/mcp`)."""
    from tests.mcp import rogue_server

    with rogue_server() as base:
        yield base


@pytest.fixture
def smtp():
    """A real SMTP server (tests/mail/smtp_server.py): its `url` and the mails it got."""
    from tests.mail.smtp_server import smtp_server

    with smtp_server() as (url, inbox):
        inbox.url = url
        yield inbox
