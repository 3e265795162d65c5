"""The security sweep: cookies, headers, and secrets kept from the model and the logs."""

from __future__ import annotations

import itertools
import logging
import re

from app.chat.models import Conversation
from app.chat.prompt import build_system_prompt
from app.chat.toolset import capability_notes, tools_for_step
from tests.factories import ChatDriver
from tests.fake_model import Turn, text


def test_the_session_cookie_is_httponly_samesite_and_secure_over_https(app, auth):
    auth.create()
    client = app.test_client()
    token = re.search(
        r'name="csrf_token" type="hidden" value="([^"]+)"',
        client.get("/login", base_url="https://localhost").get_data(as_text=True),
    ).group(1)
    response = client.post(
        "/login",
        base_url="https://localhost",
        data={"email": "ada@example.com", "password": "correct horse battery", "csrf_token": token},
        headers={"Referer": "https://localhost/login"},  # browsers send it same-origin
    )
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" in cookie
    plain = app.test_client().get("/login").headers["Set-Cookie"]
    assert "Secure" not in plain  # plain http on a laptop still works


def test_security_headers_on_every_kind_of_response(app, client, auth):
    auth.create()
    auth.login()
    for url in (
        "/login",
        "/",
        "/api/chats",
        "/workspace/offers",
        "/no-such-page",
        "/static/app.css",
    ):
        response = client.get(url)
        headers = response.headers
        response.close()
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"], url
        assert (
            "script-src 'self'" in headers["Content-Security-Policy"]
            and "unsafe-inline" not in headers["Content-Security-Policy"]
        )
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"]


def test_login_attempts_are_rate_limited(app, auth):
    client = app.test_client()
    statuses = []
    for _ in range(25):
        token = re.search(
            r'name="csrf_token" type="hidden" value="([^"]+)"',
            client.get("/login").get_data(as_text=True),
        ).group(1)
        statuses.append(
            client.post(
                "/login", data={"email": "x@example.com", "password": "nope", "csrf_token": token}
            ).status_code
        )
    assert 429 in statuses and statuses.index(429) <= 20


def test_secrets_never_reach_the_model_or_the_logs(make_app, fake_model, auth, caplog):
    api_key = "sk-ant-very-secret-key-123"
    app = make_app(anthropic_base_url=fake_model.base_url, anthropic_api_key=api_key)
    auth.app, auth.client = app, app.test_client()
    auth.create(password="hunter2-correct-horse")
    caplog.set_level(logging.DEBUG)
    auth.login(password="hunter2-correct-horse")
    raw_token = auth.client.post(
        "/settings/tokens",
        data={"name": "ci", "scope_read": "y", "scope_chat": "y", "csrf_token": auth.csrf},
        headers={"HX-Request": "true"},
    ).get_data(as_text=True)
    token = re.search(r"ld_[\w-]+", raw_token).group(0)
    fake_model.script(Turn(text("Hello.")))
    driver = ChatDriver(app, auth.client, auth)
    driver.wait(driver.send(driver.new_chat(), "Hi"))

    bodies = " ".join(str(request) for request in fake_model.requests)
    for secret in (api_key, "hunter2-correct-horse", token, app.config["SECRET_KEY"]):
        assert secret not in bodies
        assert secret not in caplog.text
    # The key does travel where it belongs: the Authorization header of the model call.
    assert fake_model.requests[0].headers.get("authorization") == f"Bearer {api_key}"


def test_capability_notes_name_exactly_the_tools_the_step_offers(app):
    """Every combination of phase, taint, image provider and role: the prompt never names a
    tool the model was not given, and names every given tool that has a note. Taint gates
    calls when they are made, so it does not change what is offered."""
    registry = app.extensions["services"].tools
    names = {tool.name for tool in registry.all()}
    for phase, _tainted, _provider, _admin in itertools.product(
        ("discovery", "build"), (False, True), (None, "http://images.example"), (False, True)
    ):
        given = tools_for_step(registry, phase)
        prompt = build_system_prompt(Conversation(summary=None), given)
        mentioned = {name for name in names if re.search(rf"\b{name}\b", prompt)}
        assert mentioned <= {tool.name for tool in given}, (
            phase,
            mentioned - {t.name for t in given},
        )
        notes = capability_notes(given)
        assert all(tool.name in notes for tool in given if tool.note)
