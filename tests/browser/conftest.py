"""Browser tests: the real app on a live server thread, the fake model, and Debian's
Chromium driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.factories import PASSWORD, add_user
from tests.live import LiveServer

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make browser` (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def module_site(tmp_path_factory):
    """One app, live server and fake model for a whole module (app, server, model): for
    tests that only read pages, so they need not pay for a server each. Its database is
    a SQLite file, or a fresh PostgreSQL schema when DATABASE_URL names PostgreSQL."""
    import uuid

    from sqlalchemy import create_engine, make_url, text

    from app import create_app
    from app.models import Base
    from tests.conftest import RATE_LIMIT_PREFIX, SERVICE_DATABASE_URL
    from tests.fake_model import FakeModelServer

    tmp = tmp_path_factory.mktemp("site")
    schema = None
    database_url = f"sqlite:///{tmp / 'site.db'}"
    if SERVICE_DATABASE_URL.startswith("postgresql"):
        schema = f"t_{uuid.uuid4().hex[:12]}"
        admin = create_engine(SERVICE_DATABASE_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = make_url(SERVICE_DATABASE_URL).update_query_dict(
            {"options": f"-csearch_path={schema}"}
        )
        database_url = url.render_as_string(hide_password=False)
    model = FakeModelServer()
    model.start()
    app = create_app(
        {
            "instance_path": tmp / "instance",
            "database_url": database_url,
            "secret_key": "test-secret",
            "TESTING": True,
            "RATELIMIT_KEY_PREFIX": RATE_LIMIT_PREFIX,
            "model_provider": "anthropic",
            "anthropic_base_url": model.base_url,
            "anthropic_api_key": "test-key",
            "redis_prefix": f"test-{uuid.uuid4().hex[:12]}:",
            "chat_titles": False,
        }
    )
    Base.metadata.create_all(app.extensions["database"].engine)
    server = LiveServer(app).start()
    yield app, server, model
    server.stop()
    app.extensions["executor"].shutdown()
    app.extensions["services"].close()
    model.stop()
    if schema:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def live_app(app_on_fake_model):
    return app_on_fake_model


@pytest.fixture
def live_server(live_app):
    server = LiveServer(live_app).start()
    yield server
    server.stop()


@pytest.fixture
def context(browser, request):
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page_errors: list[str] = []
    context.page_errors = page_errors
    yield context
    context.close()


@pytest.fixture
def page(context):
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.on("pageerror", lambda error: context.page_errors.append(str(error)))
    return page


@pytest.fixture
def person(live_app):
    """Ada's account; returns (email, password, user_id)."""
    return "ada@example.com", PASSWORD, add_user(live_app, "ada@example.com")


def pytest_collection_modifyitems(items):
    """The live server's thread may leave a file unclosed when the browser aborts a
    static response; pytest would blame whichever test is running. Not our code's leak."""
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(
                pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
            )
