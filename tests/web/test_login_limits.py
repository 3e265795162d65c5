"""Login throttling counts per client address (the real one, behind TRUSTED_PROXIES) and
slows an account's guessers with a growing delay: never one global counter that an
attacker can fill, and no lock that a stranger can put on the owner."""

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


def attempt_response(client, email="ada@example.com", password="wrong password"):
    data = {"email": email, "password": password, "csrf_token": anonymous_csrf(client)}
    return client.post("/login", data=data)


def attempt(client, email="ada@example.com", password="wrong password"):
    return attempt_response(client, email, password).status_code


# Failures not limited below the address's 20 attempts a minute, which these tests count.
ATTEMPTS_ONLY = {
    "rate_limit_login_address_failures": "100 per hour",
    "rate_limit_login_account": "100 per hour",
}


@pytest.fixture
def proxied_app(make_app):
    app = make_app(trusted_proxies=1, **ATTEMPTS_ONLY)
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
    app = make_app(**ATTEMPTS_ONLY)
    add_user(app, "ada@example.com")
    statuses = [
        attempt(browser(app, forwarded_for=f"203.0.113.{n}", address="192.0.2.1"))
        for n in range(21)
    ]
    assert statuses[-1] == 429


def test_thirty_wrong_passwords_from_one_address_do_not_lock_the_owner_out(make_app):
    """Issue 29: a stranger's guesses used to answer the owner's right password with 429
    for an hour. The guesser is held back; the owner, from another address, gets in."""
    app = make_app(trusted_proxies=1)
    add_user(app, "ada@example.com")
    stranger = browser(app, forwarded_for="203.0.113.5")
    responses = [attempt_response(stranger) for _ in range(30)]
    statuses = [response.status_code for response in responses]
    assert statuses[:5] == [400] * 5  # five failures run at full speed
    assert statuses[5:] == [429] * 25  # then the guessing address waits, unchecked
    assert int(responses[-1].headers["Retry-After"]) > 0
    assert attempt(stranger, password=PASSWORD) == 429  # even with the right password
    owner = browser(app, forwarded_for="198.51.100.7")
    assert attempt(owner, password=PASSWORD) == 302
    assert owner.get("/settings").status_code == 200


def test_a_wrong_password_from_a_new_address_is_checked_then_that_address_waits_longer(make_app):
    app = make_app(trusted_proxies=1, rate_limit_login_account="2 per hour")
    add_user(app, "ada@example.com")
    add_user(app, "bob@example.com")
    stranger = browser(app, forwarded_for="203.0.113.5")
    assert [attempt(stranger) for _ in range(3)] == [400, 400, 429]
    first_wait = int(attempt_response(stranger).headers["Retry-After"])
    other = browser(app, forwarded_for="198.51.100.7")
    assert attempt(other) == 400  # not yet guessing: its password is checked
    refused = attempt_response(other)  # now it is, and the delay has doubled
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > first_wait
    # Another account, from the very same addresses, is untouched.
    assert attempt(other, "bob@example.com", PASSWORD) == 302


def test_one_address_guessing_many_accounts_is_throttled_hard(make_app):
    app = make_app(rate_limit_login_address_failures="3 per hour")
    for name in ("ada", "bob", "cy", "di"):
        add_user(app, f"{name}@example.com")
    sprayer = browser(app)
    statuses = [attempt(sprayer, f"{name}@example.com") for name in ("ada", "bob", "cy")]
    assert statuses == [400, 400, 400]
    refused = attempt_response(sprayer, "di@example.com", PASSWORD)
    assert refused.status_code == 429
    page = refused.get_data(as_text=True)
    assert "login attempts" in page
    assert "Back to the login page" in page and "Back to your chats" not in page
    assert attempt(browser(app, address="192.0.2.77"), "di@example.com", PASSWORD) == 302


def test_the_delay_grows_from_fifteen_seconds_to_its_cap():
    from app.web.login_throttle import delay_for

    delays = [delay_for(failures, free=5, cap=900) for failures in range(1, 14)]
    assert delays == [0, 0, 0, 0, 15, 30, 60, 120, 240, 480, 900, 900, 900]


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
