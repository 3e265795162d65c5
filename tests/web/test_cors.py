"""CORS_ORIGINS: a browser app on one of those origins calls the JSON API with a token;
no other origin, no page outside /api/, and never with the session cookie."""

from __future__ import annotations

import pytest

from app.config import load_settings
from tests.factories import add_token, add_user

APP_ORIGIN = "https://app.example.com"


@pytest.fixture
def cors_app(make_app):
    app = make_app(cors_origins=(APP_ORIGIN,))
    _, token = add_token(app, add_user(app, "ada@example.com"))
    return app, {"Authorization": f"Bearer {token}"}


def test_an_allowed_origin_calls_the_api_with_a_token(cors_app):
    app, bearer = cors_app
    client = app.test_client()
    preflight = client.options(
        "/api/chats",
        headers={
            "Origin": APP_ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == APP_ORIGIN
    assert "authorization" in preflight.headers["Access-Control-Allow-Headers"].lower()
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]

    created = client.post("/api/chats", json={}, headers={"Origin": APP_ORIGIN, **bearer})
    assert created.status_code == 201
    assert created.headers["Access-Control-Allow-Origin"] == APP_ORIGIN
    # Never credentials: a session cookie is no use from another origin.
    assert "Access-Control-Allow-Credentials" not in created.headers


def test_other_origins_and_the_pages_get_no_cors_headers(cors_app):
    app, bearer = cors_app
    client = app.test_client()
    elsewhere = client.get("/api/chats", headers={"Origin": "https://evil.example", **bearer})
    assert elsewhere.status_code == 200  # a script without a browser is not CORS's concern
    assert "Access-Control-Allow-Origin" not in elsewhere.headers
    page = client.get("/login", headers={"Origin": APP_ORIGIN})
    assert "Access-Control-Allow-Origin" not in page.headers


def test_by_default_no_origin_is_allowed(make_app):
    app = make_app()
    _, token = add_token(app, add_user(app, "ada@example.com"))
    answered = app.test_client().get(
        "/api/chats", headers={"Origin": APP_ORIGIN, "Authorization": f"Bearer {token}"}
    )
    assert answered.status_code == 200
    assert "Access-Control-Allow-Origin" not in answered.headers


@pytest.mark.parametrize("value", ["*", "app.example.com", "https://app.example.com/path"])
def test_a_wrong_origin_setting_is_refused_at_start(tmp_path, value):
    with pytest.raises(ValueError, match="CORS_ORIGINS"):
        load_settings({"instance_path": tmp_path}, env={"CORS_ORIGINS": value})
