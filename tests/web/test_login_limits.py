"""Login throttling counts per client address (the real one, behind TRUSTED_PROXIES) and
failed attempts per account: never one global counter that an attacker can fill."""

from __future__ import annotations

import pytest

from tests.factories import PASSWORD, add_user
from tests.web.helpers import anonymous_csrf, redirect_path

PROXY = "10.9.9.9"


def browser(app, forwarded_for: str | None = None, address: str = PROXY):
    """A client reaching the app from `address` (a proxy, when `forwarded_for` is set)."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    if forwarded_for:
        client.environ_base["HTTP_X_FORWARDED_FOR"] = forwarded_for
    return client


def attempt(client, email="ada@example.com", password="wrong password"):
    data = {"email": email, "password": password, "csrf_token": anonymous_csrf(client)}
    return client.post("/login", data=data).status_code


@pytest.fixture
def proxied_app(make_app):
    app = make_app(trusted_proxies=1)
    add_user(app, "ada@example.com")
    add_user(app, "bob@example.com")
    return app


def test_21_bad_logins_through_a_trusted_proxy_do_not_lock_out_another_address(proxied_app):
    attacker = browser(proxied_app, forwarded_for="203.0.113.5")
    statuses = [attempt(attacker) for _ in range(21)]
    assert statuses[:20] == [400] * 20
    assert statuses[20] == 429  # the attacker's address is out of attempts
    ada = browser(proxied_app, forwarded_for="198.51.100.7")
    assert attempt(ada, password=PASSWORD) == 302
    assert ada.get("/settings").status_code == 200


def test_without_trusted_proxies_a_forwarded_header_changes_nothing(make_app):
    """Spoofing X-Forwarded-For does not give an attacker fresh addresses."""
    app = make_app()
    add_user(app, "ada@example.com")
    statuses = [
        attempt(browser(app, forwarded_for=f"203.0.113.{n}", address="192.0.2.1"))
        for n in range(21)
    ]
    assert statuses[-1] == 429


def test_failed_logins_count_against_the_account_from_any_address(make_app):
    app = make_app(trusted_proxies=1, rate_limit_login_account="5 per hour")
    add_user(app, "ada@example.com")
    add_user(app, "bob@example.com")
    for n in range(5):
        assert attempt(browser(app, forwarded_for=f"203.0.113.{n}")) == 400
    fresh = browser(app, forwarded_for="198.51.100.1")
    assert attempt(fresh, password=PASSWORD) == 429  # Ada's account rests a while
    # Another account, from the very same addresses, is untouched.
    assert attempt(browser(app, forwarded_for="203.0.113.1"), "bob@example.com", PASSWORD) == 302


def test_successful_logins_do_not_use_up_the_account(make_app):
    app = make_app(rate_limit_login_account="2 per hour")
    add_user(app, "ada@example.com")
    for _ in range(4):
        assert attempt(browser(app), password=PASSWORD) == 302


def test_the_proxy_forwarded_address_is_what_limits_count(proxied_app):
    """Two people behind the same proxy are two addresses, not one."""
    first = browser(proxied_app, forwarded_for="203.0.113.5")
    second = browser(proxied_app, forwarded_for="203.0.113.6")
    for _ in range(20):
        attempt(first, email="nobody@example.com")
    assert attempt(first, email="nobody@example.com") == 429
    assert attempt(second, email="nobody@example.com") == 400


def test_proxy_fix_gives_the_scheme_and_host_the_proxy_saw(make_app):
    app = make_app(trusted_proxies=1)
    client = browser(app, forwarded_for="203.0.113.5")
    client.environ_base.update(
        {"HTTP_X_FORWARDED_PROTO": "https", "HTTP_X_FORWARDED_HOST": "chat.example.com"}
    )
    assert redirect_path(client.get("/settings")) == "/login"
    # The proxy spoke HTTPS to the person: the session cookie is marked Secure.
    assert "Secure" in client.get("/login").headers.get("Set-Cookie", "")


def test_forms_without_a_csrf_token_do_not_use_up_the_account(make_app):
    app = make_app(rate_limit_login_account="3 per hour", rate_limit_login_address="100 per minute")
    add_user(app, "ada@example.com")
    client = browser(app)
    for _ in range(5):
        response = client.post("/login", data={"email": "ada@example.com", "password": "x"})
        assert response.status_code == 400
    assert attempt(client, password=PASSWORD) == 302
