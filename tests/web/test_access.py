"""Who may reach what: every protected URL refuses strangers, CSRF guards browser posts,
and pages carry the security headers."""

from __future__ import annotations

import pytest

from app.chat.models import Conversation
from tests.factories import PASSWORD, csrf_token_from
from tests.web.helpers import (
    anonymous_csrf,
    assert_redirects_to_login,
    bearer,
    count,
    json_error,
    snapshot,
)

# Ids refer to the objects of the `bob` fixture (each test's database is fresh, so the
# first chat, offer, persona and token are all id 1).
PAGE_GETS = [
    "/",
    "/chats/1",
    "/chats/1/rename",
    "/chats/1/item",
    "/workspace/",
    "/workspace/offers",
    "/workspace/offers/new",
    "/workspace/offers/1/edit",
    "/workspace/personas",
    "/workspace/personas/new",
    "/workspace/personas/1/edit",
    "/settings",
    "/admin/",
    "/admin/users",
    "/logout",
]
PAGE_POSTS = [
    "/chats",
    "/chats/1/rename",
    "/chats/1/delete",
    "/workspace/offers/new",
    "/workspace/offers/1/edit",
    "/workspace/personas/new",
    "/workspace/personas/1/edit",
    "/settings/tokens",
    "/settings/tokens/1/revoke",
    "/admin/users",
    "/logout",
]
API_ROUTES = [
    ("GET", "/api/chats"),
    ("POST", "/api/chats"),
    ("GET", "/api/chats/1/messages"),
    ("POST", "/api/chats/1/loop"),
    ("POST", "/api/chats/1/stop"),
    ("GET", "/api/runs/1"),
]
ALL_ROUTES = (
    [("GET", path) for path in PAGE_GETS] + [("POST", path) for path in PAGE_POSTS] + API_ROUTES
)
# What a form post might carry, so that only the missing login can be the reason to refuse.
FORM = {"title": "Hijacked", "name": "Hijacked", "email": "new@example.com", "password": "x" * 10}


@pytest.mark.parametrize("path", PAGE_GETS)
def test_page_redirects_to_login_when_logged_out(client, bob, path):
    response = client.get(path)
    assert_redirects_to_login(response, next_path=path)


@pytest.mark.parametrize("path", PAGE_POSTS)
def test_page_post_redirects_to_login_and_changes_nothing(app, client, bob, path):
    before = snapshot(app)
    response = client.post(path, data={**FORM, "csrf_token": anonymous_csrf(client)})
    assert_redirects_to_login(response, next_path=path)
    assert snapshot(app) == before


@pytest.mark.parametrize(("method", "path"), API_ROUTES)
def test_api_answers_401_json_when_logged_out(app, client, bob, method, path):
    before = snapshot(app)
    # The anonymous session's CSRF header, so the missing login is the only thing wrong.
    response = client.open(
        path, method=method, json={"title": "x"}, headers={"X-CSRFToken": anonymous_csrf(client)}
    )
    assert json_error(response, 401) == "UNAUTHORIZED"
    assert snapshot(app) == before


def test_garbage_bearer_token_gets_401_everywhere(app, client, bob):
    """One app for all routes (a loop, not parametrized: building an app is the slow part)."""
    before = snapshot(app)
    for method, path in ALL_ROUTES:
        response = client.open(path, method=method, data=FORM, headers=bearer("ld_not-a-token"))
        if path.startswith("/api/"):
            assert json_error(response, 401) == "UNAUTHORIZED", (method, path)
        else:
            # A page answers with the HTML error page, not a redirect to a login form.
            assert response.status_code == 401, (method, path)
            assert b"valid bearer token" in response.data, (method, path)
    assert snapshot(app) == before


def test_login_returns_to_the_page_that_asked_for_it(client, auth):
    auth.create()
    response = client.get("/workspace/offers")
    assert_redirects_to_login(response, next_path="/workspace/offers")
    login_url = response.headers["Location"]
    token = csrf_token_from(client.get(login_url).get_data(as_text=True))
    response = client.post(
        login_url, data={"email": "ada@example.com", "password": PASSWORD, "csrf_token": token}
    )
    assert response.headers["Location"] == "/workspace/offers"
    assert client.get("/workspace/offers").status_code == 200


def test_browser_api_post_without_csrf_header_is_refused(app, client, user, auth):
    response = client.post("/api/chats", json={"title": "No token"})
    assert json_error(response, 400) == "CSRF_FAILED"
    response = client.post(
        "/api/chats", json={"title": "Wrong token"}, headers={"X-CSRFToken": "forged"}
    )
    assert json_error(response, 400) == "CSRF_FAILED"
    assert count(app, Conversation) == 0
    # The same call with the page's token works.
    response = client.post("/api/chats", json={"title": "Fine"}, headers=auth.headers())
    assert response.status_code == 201
    assert count(app, Conversation) == 1


def test_fake_bearer_header_does_not_let_a_browser_skip_csrf(app, client, user):
    """Naming a token skips the CSRF check, so the session cookie must not count then."""
    response = client.post("/chats", headers=bearer("ld_forged"))
    assert response.status_code == 401
    response = client.post("/api/chats", json={}, headers=bearer("ld_forged"))
    assert json_error(response, 401) == "UNAUTHORIZED"
    assert count(app, Conversation) == 0


def test_someone_elses_chat_looks_exactly_like_a_missing_one(client, user, bob):
    theirs = client.get(f"/chats/{bob['conversation']}")
    missing = client.get("/chats/999")
    assert theirs.status_code == missing.status_code == 404
    assert b"Bob&#39;s private chat" not in theirs.data
    assert b"Not found." in theirs.data
    api_theirs = client.get(f"/api/chats/{bob['conversation']}/messages")
    api_missing = client.get("/api/chats/999/messages")
    assert json_error(api_theirs, 404) == "NOT_FOUND"
    assert api_theirs.get_json() == api_missing.get_json()


def test_unknown_api_route_answers_json_404(client):
    assert json_error(client.get("/api/no-such-thing"), 404) == "NOT_FOUND"


@pytest.mark.parametrize("path", ["/login", "/", "/api/chats"])
def test_security_headers(client, user, path):
    response = client.get(path)
    assert response.status_code == 200
    csp = response.headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp
    assert "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"


def test_security_headers_on_error_pages(client):
    response = client.get("/no-such-page")
    assert response.status_code == 404
    assert "default-src 'self'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
