"""The admin area: only administrators, who can add people."""

from __future__ import annotations

import pytest

from app.accounts.models import User
from tests.factories import csrf_token_from
from tests.web.helpers import alerts, count, redirect_path, snapshot

NEW_PERSON = {"email": "grace@example.com", "password": "a long password"}


@pytest.fixture
def admin(auth):
    user_id = auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    return user_id


def can_log_in(app, email, password) -> bool:
    client = app.test_client()
    token = csrf_token_from(client.get("/login").get_data(as_text=True))
    response = client.post(
        "/login", data={"email": email, "password": password, "csrf_token": token}
    )
    return response.status_code == 302


def test_non_admin_gets_403(app, client, auth, user):
    assert client.get("/admin/users").status_code == 403
    assert client.get("/admin/").status_code == 403
    before = snapshot(app)
    response = client.post("/admin/users", data={**NEW_PERSON, "csrf_token": auth.csrf})
    assert response.status_code == 403
    assert snapshot(app) == before
    assert 'href="/admin/users"' not in client.get("/settings").get_data(as_text=True)


def test_admin_sees_people(client, admin, bob):
    assert redirect_path(client.get("/admin/")) == "/admin/users"
    response = client.get("/admin/users")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert "root@example.com" in html and "bob@example.com" in html
    assert 'href="/admin/users"' in client.get("/settings").get_data(as_text=True)


@pytest.mark.parametrize("make_admin", [False, True])
def test_admin_creates_a_person_who_can_log_in(app, client, auth, admin, make_admin):
    data = {**NEW_PERSON, "csrf_token": auth.csrf}
    if make_admin:
        data["is_admin"] = "y"
    response = client.post("/admin/users", data=data)
    assert redirect_path(response) == "/admin/users"
    page = client.get("/admin/users").get_data(as_text=True)
    assert "Created grace@example.com." in page
    assert count(app, User, User.email == "grace@example.com", User.is_admin.is_(make_admin)) == 1
    assert can_log_in(app, "grace@example.com", "a long password")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"email": ""}, "required"),
        ({"email": "not-an-email"}, "email"),
        ({"email": "a" * 250 + "@example.com"}, ""),
        ({"email": "ROOT@example.com"}, "already exists"),
        ({"password": ""}, "required"),
        ({"password": "short"}, "8 to 200"),
        ({"password": "x" * 201}, "8 to 200"),
    ],
    ids=[
        "no-email",
        "bad-email",
        "email-too-long",
        "duplicate",
        "no-password",
        "short-password",
        "long-password",
    ],
)
def test_admin_create_with_bad_input_is_400(app, client, auth, admin, changes, message):
    before = snapshot(app)
    response = client.post("/admin/users", data={**NEW_PERSON, **changes, "csrf_token": auth.csrf})
    assert response.status_code == 400
    assert any(message in alert.lower() for alert in alerts(response)), alerts(response)
    assert snapshot(app) == before


def test_admin_create_without_csrf_token_saves_nothing(app, client, admin):
    response = client.post("/admin/users", data=NEW_PERSON)
    assert response.status_code == 400
    assert count(app, User) == 1
