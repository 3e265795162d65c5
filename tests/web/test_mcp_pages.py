"""MCP servers on the pages: a person's own in Settings, the admin's on Admin → MCP
servers; the same rules as the API, refusals shown in the form, header values never."""

from __future__ import annotations

import httpx2 as httpx
import pytest
from sqlalchemy import select

from app.mcp.models import McpServer
from tests.mcp import TIME_COMMAND

SECRET = "Bearer page-secret-93"


@pytest.fixture
def app(make_app):
    return make_app(fetch_allow_hosts=("127.0.0.1",))


def _servers(app):
    with app.extensions["database"].session() as session:
        return [(s.name, s.owner_id) for s in session.scalars(select(McpServer))]


def test_a_person_adds_checks_approves_and_removes_their_server(app, client, auth, rogue):
    ada = auth.create()
    auth.login()
    form = {"name": "weather", "url": f"{rogue}/mcp", "headers": f"Authorization: {SECRET}"}

    added = client.post("/settings/mcp-servers", data=form, headers=auth.headers())
    assert added.status_code == 201
    html = added.get_data(as_text=True)
    assert 'id="mcp-server-weather"' in html and "lookup_weather" in html
    assert "Authorization" in html and SECRET not in html
    assert SECRET not in client.get("/settings").get_data(as_text=True)
    assert _servers(app) == [("weather", ada)]

    httpx.post(f"{rogue}/rug", timeout=5)
    checked = client.post("/settings/mcp-servers/weather/check", headers=auth.headers())
    assert 'id="mcp-server-weather-pending"' in checked.get_data(as_text=True)
    approved = client.post("/settings/mcp-servers/weather/approve", headers=auth.headers())
    assert 'id="mcp-server-weather-pending"' not in approved.get_data(as_text=True)
    client.post("/settings/mcp-servers/weather/remove", headers=auth.headers())
    assert _servers(app) == []


def test_a_refused_server_is_explained_in_the_form_and_nothing_is_saved(app, client, auth):
    auth.create()
    auth.login()
    refused = client.post(
        "/settings/mcp-servers",
        data={"name": "mine", "command": TIME_COMMAND, "policy": "when_tainted"},
        headers=auth.headers(),
    )
    assert refused.status_code == 400
    assert "Only an admin may add a server that runs a local command." in refused.get_data(
        as_text=True
    )
    assert 'value="mine"' in refused.get_data(as_text=True), "what was typed is kept"
    assert _servers(app) == []


def test_an_admin_adds_a_local_server_for_everyone(app, client, auth):
    auth.create(admin=True)
    auth.login()
    assert 'id="mcp-add-heading"' in client.get("/admin/mcp-servers").get_data(as_text=True)
    added = client.post(
        "/admin/mcp-servers",
        data={"name": "time", "command": TIME_COMMAND, "policy": "always"},
        headers=auth.headers(),
    )
    assert added.status_code == 201, added.get_data(as_text=True)
    assert "get_current_time" in added.get_data(as_text=True)
    assert _servers(app) == [("time", None)]


def test_a_tools_read_only_claim_is_trusted_from_the_page(app, client, auth):
    auth.create(admin=True)
    auth.login()
    added = client.post(
        "/admin/mcp-servers",
        data={"name": "time", "command": TIME_COMMAND, "policy": "never"},
        headers=auth.headers(),
    )
    assert added.status_code == 201, added.get_data(as_text=True)
    page = client.get("/admin/mcp-servers").get_data(as_text=True)
    assert "trust it: that get_current_time only reads" in page
    trusted = client.post(
        "/admin/mcp-servers/time/read-only/get_current_time", headers=auth.headers()
    ).get_data(as_text=True)
    assert "get_current_time</code> (read-only, approved)" in trusted
    with app.extensions["database"].session() as session:
        server = session.scalars(select(McpServer)).one()
        assert server.read_only_approved == ["get_current_time"]
