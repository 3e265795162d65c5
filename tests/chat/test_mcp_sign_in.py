"""Per-person sign-in to MCP servers that ask for one (OAuth 2.1, PKCE, dynamic client
registration, through the SDK's client), against tests/mcp/gatekeeper_server.py, whose
every sign-in is a new resource owner and whose `whoami` tool says whose token a call
carried. The sign-in spans two requests (the authorization page between them), nothing of
it is held in a process, each person's calls carry their own tokens, an expired token is
refreshed and the new one kept, and no token reaches a page, the model or the clear."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx2 as httpx
import pytest
from sqlalchemy import select, text

from app.chat.toolset import run_tools
from app.mcp.models import McpServer, McpSignIn
from tests.factories import ChatDriver
from tests.fake_model import Turn, tool_use
from tests.fake_model import text as text_block

ADMIN = "root@example.com"


@pytest.fixture(scope="module")
def gatekeeper():
    from tests.mcp import gatekeeper_server

    with gatekeeper_server() as base:
        yield base


@pytest.fixture
def app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, fetch_allow_hosts=("127.0.0.1",))


def _sign_in(client, auth, name):
    """Press Sign in, let the authorization page send the browser back, follow it."""
    headers = {**auth.headers(), "HX-Request": "true"}
    started = client.post(f"/settings/mcp-servers/{name}/sign-in", headers=headers)
    assert started.status_code == 204, started.get_data(as_text=True)
    authorize = httpx.get(started.headers["HX-Redirect"], timeout=10)
    assert authorize.status_code == 302, authorize.text
    back = urlsplit(authorize.headers["location"])
    assert back.path == "/settings/mcp-servers/signed-in"
    return f"{back.path}?{back.query}"


def _as(auth, email):
    auth.logout()
    auth.login(email)


def _whoami(app, fake_model, driver):
    """One run that calls the server's whoami tool: what the tool said."""

    def respond(body):
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return Turn(text_block("Noted."))
        return Turn(tool_use("mcp__keep__whoami", {}))

    fake_model.responder = respond
    chat_id = driver.new_chat()
    run = driver.wait(driver.send(chat_id, "Who am I there?"), timeout=30)
    assert run["status"] == "completed", run
    result = fake_model.requests[-1]["messages"][-1]["content"][0]
    return result


def _grant(app, email):
    database = app.extensions["database"]
    with database.session() as session:
        row = session.execute(
            select(McpSignIn).join_from(McpSignIn, McpServer).where(McpServer.name == "keep")
        ).scalars()
        user_ids = {r.user_id: r for r in row}
        from app.accounts.models import User

        user = session.scalars(select(User).where(User.email == email)).one()
        sealed = user_ids[user.id].sealed_grant
    return app.extensions["services"].secrets.open(sealed)


def _offered(app, user_id):
    services = app.extensions["services"]
    with services.database.session() as session:
        return [tool.name for tool in run_tools(session, services, user_id).all()]


def test_each_person_calls_a_shared_server_with_their_own_sign_in(
    app, client, auth, chat, fake_model, gatekeeper
):
    admin_id = auth.create(ADMIN, admin=True)
    code = app.test_cli_runner().invoke(args=["mcp", "add", "keep", "--url", f"{gatekeeper}/mcp"])
    assert code.exit_code == 0 and "asks each person to sign in" in code.output, code.output

    page = client.get("/settings").get_data(as_text=True)
    assert "Servers for everyone that ask you to sign in" in page
    assert 'aria-label="Sign in to keep"' in page
    back = client.get(_sign_in(client, auth, "keep"))
    assert back.status_code == 303 and back.headers["Location"].endswith("/settings#mcp-heading")
    page = client.get("/settings").get_data(as_text=True)
    assert "Signed in to keep." in page and "once an admin has signed in" in page
    assert "You are signed in." in page
    assert _offered(app, chat.user_id) == _offered(app, admin_id), "no tools pinned yet"

    _as(auth, ADMIN)
    client.get(_sign_in(client, auth, "keep"))
    assert "mcp__keep__whoami" in _offered(app, admin_id), "the admin's sign-in pinned them"
    admin_says = _whoami(app, fake_model, ChatDriver(app, client, auth, admin_id))

    _as(auth, "ada@example.com")
    ada_says = _whoami(app, fake_model, chat)
    assert "You are person-1." in json.dumps(ada_says), "Ada's call carries Ada's token"
    assert "You are person-2." in json.dumps(admin_says), "the admin's carries the admin's"

    token = _grant(app, "ada@example.com")["tokens"]["access_token"]
    with app.extensions["database"].session() as session:
        stored = session.execute(text("SELECT * FROM mcp_sign_ins")).all()
    assert token.encode() not in repr(stored).encode(), "sealed at rest"
    assert all(token not in json.dumps(request) for request in fake_model.requests)
    assert token not in client.get("/settings").get_data(as_text=True)
    assert token not in json.dumps(client.get("/api/mcp-servers").get_json())


def test_a_sign_in_is_the_starters_own_used_once_and_refused_otherwise(
    app, client, auth, gatekeeper
):
    auth.create(ADMIN, admin=True)
    auth.create()
    auth.create("bob@example.com")
    app.test_cli_runner().invoke(args=["mcp", "add", "keep", "--url", f"{gatekeeper}/mcp"])
    auth.login()
    adas_return = _sign_in(client, auth, "keep")

    _as(auth, "bob@example.com")
    stolen = client.get(adas_return, follow_redirects=True).get_data(as_text=True)
    assert "not one you started" in stolen
    _as(auth, "ada@example.com")
    assert "Signed in to keep." in client.get(adas_return, follow_redirects=True).get_data(
        as_text=True
    )
    again = client.get(adas_return, follow_redirects=True).get_data(as_text=True)
    assert "already used" in again, "a return address works once"
    refused = client.get(
        "/settings/mcp-servers/signed-in?error=access_denied", follow_redirects=True
    )
    assert "The sign-in was not completed (access_denied)." in refused.get_data(as_text=True)
    assert (
        client.post("/settings/mcp-servers/nope/sign-in", headers=auth.headers()).status_code == 404
    )


def test_an_expired_token_is_refreshed_and_kept_and_a_revoked_one_asks_to_sign_in_again(
    app, client, auth, chat, fake_model, gatekeeper
):
    added = client.post(
        "/settings/mcp-servers",
        data={"name": "keep", "url": f"{gatekeeper}/mcp", "policy": "when_tainted"},
        headers=auth.headers(),
    )
    assert added.status_code == 201, added.get_data(as_text=True)
    assert "Asks each person to sign in" in added.get_data(as_text=True)
    listed = client.get("/api/mcp-servers").get_json()["servers"]
    assert listed[0]["sign_in"] is True and listed[0]["signed_in"] is False

    httpx.post(f"{gatekeeper}/short", timeout=5)  # the next tokens expire at once
    client.get(_sign_in(client, auth, "keep"))
    # Listing the tools to pin them found the token expired: the SDK refreshed it (the
    # server rotates refresh tokens, so only the kept new one works from now on).
    assert "mcp__keep__whoami" in _offered(app, chat.user_id), "the owner's sign-in pinned them"
    log = httpx.get(f"{gatekeeper}/log", timeout=5).json()
    assert log[-2:] == ["authorization_code", "refresh_token"]

    said = _whoami(app, fake_model, chat)
    assert "You are person-" in json.dumps(said) and not said.get("is_error"), said
    assert httpx.get(f"{gatekeeper}/log", timeout=5).json() == log, "no second refresh"

    httpx.post(f"{gatekeeper}/revoke", timeout=5)
    refused = _whoami(app, fake_model, chat)
    assert refused["is_error"] is True
    assert "sign in again on the Settings page" in json.dumps(refused)

    httpx.post(f"{gatekeeper}/short", timeout=5)
    client.get(_sign_in(client, auth, "keep"))  # the tools are pinned: nothing lists them now
    for _call in range(2):  # the first call's refresh is kept for the second
        assert not _whoami(app, fake_model, chat).get("is_error")
    assert httpx.get(f"{gatekeeper}/log", timeout=5).json()[-2:] == [
        "authorization_code",
        "refresh_token",
    ]

    client.post("/settings/mcp-servers/keep/sign-out", headers=auth.headers())
    assert "mcp__keep__whoami" not in _offered(app, chat.user_id)
    assert client.get("/api/mcp-servers").get_json()["servers"][0]["signed_in"] is False
