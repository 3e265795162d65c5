"""The `flask` commands people run by hand: create-user, create-token, seed-demo."""

from __future__ import annotations

import pytest

from app.accounts.models import ApiToken, User
from app.workspace.models import Offer, Persona
from app.workspace.seed import DEMO_EMAIL, DEMO_PASSWORD
from tests.factories import add_user, csrf_token_from
from tests.web.helpers import bearer, count, sha256, snapshot


def can_log_in(app, email, password) -> bool:
    client = app.test_client()
    token = csrf_token_from(client.get("/login").get_data(as_text=True))
    response = client.post(
        "/login", data={"email": email, "password": password, "csrf_token": token}
    )
    return response.status_code == 302


@pytest.mark.parametrize("admin", [False, True])
def test_create_user(app, runner, admin):
    args = ["create-user", "Grace@Example.com", "--password", "a long password"]
    result = runner.invoke(args=args + (["--admin"] if admin else []))
    assert result.exit_code == 0, result.output
    assert "Created grace@example.com" in result.output
    assert count(app, User, User.email == "grace@example.com", User.is_admin.is_(admin)) == 1
    assert can_log_in(app, "grace@example.com", "a long password")


@pytest.mark.parametrize(
    ("email", "password", "message"),
    [
        ("ada@example.com", "a long password", "already exists"),
        ("not-an-email", "a long password", "valid email"),
        ("grace@example.com", "short", "8 to 200"),
    ],
    ids=["duplicate", "bad-email", "short-password"],
)
def test_create_user_refuses_bad_input(app, runner, email, password, message):
    add_user(app, "ada@example.com")
    before = snapshot(app)
    result = runner.invoke(args=["create-user", email, "--password", password])
    assert result.exit_code != 0
    assert message in result.output
    assert snapshot(app) == before


def test_create_token_prints_a_token_that_authenticates(app, runner):
    add_user(app, "ada@example.com")
    result = runner.invoke(args=["create-token", "ada@example.com", "--name", "laptop"])
    assert result.exit_code == 0, result.output
    raw = result.output.strip()
    assert raw.startswith("ld_")
    # Stored hashed only.
    assert count(app, ApiToken, ApiToken.token_hash == sha256(raw), ApiToken.name == "laptop") == 1
    assert raw not in repr(snapshot(app))

    client = app.test_client()
    response = client.get("/api/chats", headers=bearer(raw))
    assert response.status_code == 200
    assert response.get_json() == {"chats": []}
    assert (
        client.post("/api/chats", json={"title": "From the CLI"}, headers=bearer(raw)).status_code
        == 201
    )
    assert [
        c["title"] for c in client.get("/api/chats", headers=bearer(raw)).get_json()["chats"]
    ] == ["From the CLI"]


def test_create_token_for_unknown_email_fails(app, runner):
    result = runner.invoke(args=["create-token", "nobody@example.com"])
    assert result.exit_code != 0
    assert "No account for nobody@example.com" in result.output
    assert count(app, ApiToken) == 0


def test_seed_demo_on_an_empty_database_then_again(app, runner):
    result = runner.invoke(args=["seed-demo"])
    assert result.exit_code == 0, result.output
    assert "Created the demo account" in result.output
    assert f"Log in as {DEMO_EMAIL} with password {DEMO_PASSWORD}" in result.output
    assert count(app, User) == 1
    assert count(app, User, User.email == DEMO_EMAIL, User.is_admin.is_(True)) == 1
    offers = count(app, Offer)
    assert offers >= 3
    assert count(app, Persona) >= offers
    assert can_log_in(app, DEMO_EMAIL, DEMO_PASSWORD)

    after_first = snapshot(app)
    result = runner.invoke(args=["seed-demo"])
    assert result.exit_code == 0, result.output
    assert "Created" not in result.output
    assert snapshot(app) == after_first


def test_seed_demo_leaves_a_database_with_people_alone(app, runner):
    add_user(app, "ada@example.com")
    result = runner.invoke(args=["seed-demo"])
    assert result.exit_code == 0, result.output
    assert "Created" not in result.output
    assert count(app, User) == 1
    assert count(app, User, User.email == DEMO_EMAIL) == 0
    assert count(app, Offer) == 0


def test_create_token_with_scopes_and_expiry(app, runner):
    from datetime import timedelta

    from sqlalchemy import select

    from app.accounts.models import ApiToken
    from app.db import utcnow
    from tests.factories import add_user
    from tests.web.helpers import bearer, database

    add_user(app, "ada@example.com")
    result = runner.invoke(
        args=["create-token", "ada@example.com", "--scope", "read", "--expires-days", "30"]
    )
    assert result.exit_code == 0, result.output
    raw = result.output.strip()
    with database(app).session() as session:
        token = session.scalars(select(ApiToken)).one()
    assert token.scopes == "read"
    assert timedelta(days=29) < token.expires_at - utcnow() <= timedelta(days=30)
    client = app.test_client()
    assert client.get("/api/chats", headers=bearer(raw)).status_code == 200
    assert client.post("/api/chats", json={}, headers=bearer(raw)).status_code == 403
    refused = runner.invoke(args=["create-token", "ada@example.com", "--scope", "admin"])
    assert refused.exit_code != 0 and "not an admin" in refused.output
