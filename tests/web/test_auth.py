"""Logging in and out, and signing up."""

from __future__ import annotations

import pytest

from app.accounts.models import User
from tests.factories import PASSWORD, csrf_token_from
from tests.web.helpers import (
    alerts,
    anonymous_csrf,
    assert_redirects_to_login,
    count,
    redirect_path,
    snapshot,
    stays_on_site,
)


def post_login(client, email="ada@example.com", password=PASSWORD, url="/login", **extra):
    data = {"email": email, "password": password, "csrf_token": anonymous_csrf(client), **extra}
    return client.post(url, data={k: v for k, v in data.items() if v is not None})


def logged_in(client) -> bool:
    return client.get("/settings").status_code == 200


# Log in


def test_login_page_has_a_form_with_csrf_token(client):
    response = client.get("/login")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert 'name="email"' in html and 'name="password"' in html
    assert csrf_token_from(html)


def test_login_with_the_right_password(client, auth):
    auth.create()
    response = post_login(client)
    assert redirect_path(response) == "/"
    assert logged_in(client)
    assert "Log out" in client.get("/").get_data(as_text=True)


def test_login_ignores_case_and_spaces_in_the_email(client, auth):
    auth.create()
    assert redirect_path(post_login(client, email="  ADA@Example.COM ")) == "/"
    assert logged_in(client)


def test_wrong_password_and_unknown_email_look_the_same(client, auth):
    auth.create()
    wrong_password = post_login(client, password="not the password")
    unknown_email = post_login(client, email="nobody@example.com")
    assert wrong_password.status_code == unknown_email.status_code == 400
    assert alerts(wrong_password) == alerts(unknown_email)
    assert alerts(wrong_password) == ["That email and password do not match an account."]
    assert not logged_in(client)


@pytest.mark.parametrize(
    ("email", "password"),
    [
        (None, PASSWORD),
        ("ada@example.com", None),
        ("", ""),
        ("a" * 250 + "@example.com", PASSWORD),
        ("ada@example.com", "x" * 201),
    ],
    ids=["no-email", "no-password", "blank", "email-too-long", "password-too-long"],
)
def test_login_with_bad_input_is_refused(client, auth, email, password):
    auth.create()
    response = post_login(client, email=email, password=password)
    assert response.status_code == 400
    assert alerts(response)
    assert not logged_in(client)


def test_login_without_csrf_token_is_refused(client, auth):
    auth.create()
    response = client.post("/login", data={"email": "ada@example.com", "password": PASSWORD})
    assert response.status_code == 400
    assert not logged_in(client)


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/",
        "//evil.example/",
        "/\\evil.example",
        "\\\\evil.example",
        "/\t/evil.example",
        "http:/evil.example",
        "javascript:alert(1)",
        "evil.example",
    ],
)
def test_login_ignores_a_next_parameter_pointing_off_site(client, auth, target):
    auth.create()
    response = post_login(client, url="/login?" + _query(next=target))
    assert response.status_code == 302
    location = response.headers["Location"]
    assert stays_on_site(location), location
    assert "evil.example" not in location or location.startswith("/%5C")


def test_login_follows_a_same_site_next_parameter(client, auth):
    auth.create()
    response = post_login(client, url="/login?" + _query(next="/workspace/personas?x=1"))
    assert response.headers["Location"] == "/workspace/personas?x=1"


def _query(**params) -> str:
    from urllib.parse import urlencode

    return urlencode(params)


# Log out


def test_logout_asks_first_then_logs_out(client, user, auth):
    page = client.get("/logout")
    assert page.status_code == 200
    assert "Log out?" in page.get_data(as_text=True)
    assert logged_in(client)
    response = auth.logout()
    assert_redirects_to_login(response)
    assert not logged_in(client)
    assert_redirects_to_login(client.get("/"))


def test_logout_without_csrf_token_keeps_you_logged_in(client, user):
    response = client.post("/logout")
    assert response.status_code == 400
    assert logged_in(client)


# Sign up


def post_signup(client, email="new@example.com", password="a fine password", confirm=None):
    data = {
        "email": email,
        "password": password,
        "confirm": password if confirm is None else confirm,
        "csrf_token": anonymous_csrf(client),
    }
    return client.post("/signup", data={k: v for k, v in data.items() if v is not None})


EMAIL_TAKEN = "That email already has an account"


def test_signup_creates_an_account_and_signs_you_in(app, client):
    assert client.get("/signup").status_code == 200
    response = post_signup(client)
    assert redirect_path(response) == "/"
    page = client.get("/").get_data(as_text=True)
    assert "Welcome to Loopdesk." in page and 'id="welcome-form"' in page  # the welcome step
    assert logged_in(client)
    assert count(app, User, User.email == "new@example.com", User.is_admin.is_(False)) == 1
    # The password is stored hashed, and works for the next login.
    logout = client.get("/logout").get_data(as_text=True)
    client.post("/logout", data={"csrf_token": csrf_token_from(logout)})
    assert not logged_in(client)
    assert redirect_path(post_login(client, "new@example.com", "a fine password")) == "/"


def test_signup_with_a_taken_email_creates_nothing_and_signs_no_one_in(app, client, auth):
    auth.create("ada@example.com")
    before = snapshot(app)
    for email in ("ada@example.com", "ADA@Example.com"):
        taken = post_signup(client, email=email)
        assert redirect_path(taken) == "/login"
        assert EMAIL_TAKEN in client.get("/login").get_data(as_text=True)
    assert snapshot(app) == before
    assert not logged_in(client)
    # Ada's own password still works; the one sign-up tried does not.
    assert post_login(client, "ada@example.com", "a fine password").status_code == 400
    assert redirect_path(post_login(client, "ada@example.com", PASSWORD)) == "/"


def test_signup_hashes_a_password_whether_or_not_the_email_is_taken(app, client, auth, monkeypatch):
    """The work (and so the time) is the same either way: one argon2 hash per sign-up."""
    import app.accounts.models as account_models

    auth.create("ada@example.com")
    hashes = []
    hasher = account_models._hasher

    class CountingHasher(type(hasher)):
        def hash(self, password, **kwargs):
            hashes.append(password)
            return super().hash(password, **kwargs)

    monkeypatch.setattr(
        account_models, "_hasher", CountingHasher(time_cost=1, memory_cost=1024, parallelism=1)
    )
    post_signup(client, email="fresh@example.com", password="a fine password")
    post_signup(client, email="ada@example.com", password="another fine password")
    assert hashes == ["a fine password", "another fine password"]


@pytest.mark.parametrize(
    "password",
    ["12345678", "password1", "qwertyuiop", "iloveyou123", "newnewnew", "loopdesk1"],
)
def test_signup_refuses_common_and_guessable_passwords(app, client, password):
    response = post_signup(client, email="new@example.com", password=password)
    assert response.status_code == 400
    assert alerts(response)
    assert count(app, User) == 0


def test_signup_is_limited_per_address(make_app):
    app = make_app(rate_limit_signup="3 per hour")
    client = app.test_client()
    for number in range(3):
        assert post_signup(client, email=f"n{number}@example.com").status_code == 302
    refused = post_signup(client, email="n4@example.com")
    assert refused.status_code == 429
    # Worded for sign-up, with a way on that fits someone not logged in.
    page = refused.get_data(as_text=True)
    assert "Too many sign-ups from this address" in page and "messages" not in page
    assert '<a href="/login">Log in</a>' in page and "Back to your chats" not in page
    other = app.test_client()
    other.environ_base["REMOTE_ADDR"] = "10.0.0.2"
    assert post_signup(other, email="n5@example.com").status_code == 302
    assert count(app, User) == 4


@pytest.mark.parametrize(
    ("email", "password", "confirm"),
    [
        (None, "a fine password", None),
        ("not-an-email", "a fine password", None),
        ("a" * 250 + "@example.com", "a fine password", None),
        ("new@example.com", "short", None),
        ("new@example.com", "x" * 201, None),
        ("new@example.com", "a fine password", "a different one"),
    ],
    ids=["no-email", "bad-email", "email-too-long", "short-password", "long-password", "mismatch"],
)
def test_signup_with_bad_input_creates_nothing(app, client, email, password, confirm):
    response = post_signup(client, email=email, password=password, confirm=confirm)
    assert response.status_code == 400
    assert alerts(response)
    assert count(app, User) == 0
    assert not logged_in(client)


def test_signup_without_csrf_token_creates_nothing(app, client):
    response = client.post(
        "/signup",
        data={
            "email": "new@example.com",
            "password": "a fine password",
            "confirm": "a fine password",
        },
    )
    assert response.status_code == 400
    assert count(app, User) == 0


def test_signup_closed(make_app):
    app = make_app(open_signup=False)
    client = app.test_client()
    page = client.get("/signup")
    assert page.status_code == 403
    assert "Sign-up is closed" in page.get_data(as_text=True)
    assert "Create an account" not in client.get("/login").get_data(as_text=True)
    response = post_signup(client)
    assert response.status_code == 403
    assert count(app, User) == 0
    assert not logged_in(client)


def test_signup_link_shown_when_open(client):
    assert "Create an account" in client.get("/login").get_data(as_text=True)
