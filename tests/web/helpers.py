"""Small helpers for the web tests: database look-ups outside any request, and checks
that every test file makes the same way."""

from __future__ import annotations

import hashlib
import html
import re
from urllib.parse import parse_qs, urljoin, urlsplit

from sqlalchemy import func, select

from app.models import Base
from tests.factories import csrf_token_from


def database(app):
    return app.extensions["database"]


def count(app, model, *where) -> int:
    """Rows of `model` matching `where`, read in a fresh session (so it sees commits)."""
    with database(app).session() as session:
        return session.scalar(select(func.count()).select_from(model).where(*where))


def fetch(app, model, object_id):
    """A fresh copy of one row (detached; its loaded columns stay readable)."""
    with database(app).session() as session:
        return session.get(model, object_id)


# Bookkeeping that a request authenticated by a token updates on purpose.
SNAPSHOT_IGNORES = {"api_tokens": {"last_used_at"}}


def snapshot(app) -> dict[str, list[tuple]]:
    """Every row of every table, to compare before and after a request that must change
    nothing."""
    with database(app).session() as session:
        tables = {}
        for table in Base.metadata.sorted_tables:
            ignored = SNAPSHOT_IGNORES.get(table.name, set())
            columns = [column for column in table.columns if column.name not in ignored]
            rows = session.execute(select(*columns))
            tables[table.name] = sorted((tuple(map(repr, row)) for row in rows), key=repr)
        return tables


def bearer(raw: str) -> dict:
    return {"Authorization": f"Bearer {raw}"}


def sha256(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def anonymous_csrf(client) -> str:
    """A CSRF token for a client that is not logged in (the login page hands one out)."""
    return csrf_token_from(client.get("/login").get_data(as_text=True))


def json_error(response, status: int) -> str:
    """Assert the contract's JSON error shape and status; return the error code."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.is_json, response.headers.get("Content-Type")
    body = response.get_json()
    assert set(body) == {"error"}
    assert isinstance(body["error"]["code"], str) and body["error"]["code"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]["code"]


def redirect_path(response) -> str:
    assert response.status_code in (301, 302, 303), response.get_data(as_text=True)[:500]
    return urlsplit(response.headers["Location"]).path


def assert_redirects_to_login(response, next_path: str | None = None) -> None:
    assert response.status_code == 302, response.get_data(as_text=True)[:500]
    location = urlsplit(response.headers["Location"])
    assert location.path == "/login"
    if next_path is not None:
        assert parse_qs(location.query).get("next") == [next_path]


def stays_on_site(location: str) -> bool:
    """Whether a browser at http://localhost/login would stay on localhost following it
    (browsers read a backslash like a slash)."""
    resolved = urlsplit(urljoin("http://localhost/login", location.replace("\\", "/")))
    return resolved.scheme == "http" and resolved.netloc == "localhost"


def alerts(response) -> list[str]:
    """The error messages a person sees next to the form fields."""
    return [
        html.unescape(message)
        for message in re.findall(r'role="alert">([^<]*)<', response.get_data(as_text=True))
    ]


def sign_up(client, email="new@example.com") -> None:
    password = "a fine password"
    response = client.post(
        "/signup",
        data={
            "email": email,
            "password": password,
            "confirm": password,
            "csrf_token": anonymous_csrf(client),
        },
    )
    # A new account is signed in at once.
    assert redirect_path(response) == "/"
