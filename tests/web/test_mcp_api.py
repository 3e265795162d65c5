"""MCP servers over the JSON API: an admin's for everyone, a person's own for them alone,
with the same rules as the command line (tests/chat/test_mcp_runs.py) and clear refusals
that save nothing."""

from __future__ import annotations

import httpx2 as httpx
import pytest
from sqlalchemy import select

from app.mcp.models import McpServer
from tests.factories import add_token, add_user

SECRET = "Bearer api-secret-41"


@pytest.fixture
def app(make_app):
    # The rogue server listens on 127.0.0.1: a person's server there is allowed only so.
    return make_app(fetch_allow_hosts=("127.0.0.1",))


def _as(client, raw_token):
    return {"headers": {"Authorization": f"Bearer {raw_token}"}}


def _tokens(app):
    admin = add_user(app, "admin@example.com", admin=True)
    ada = add_user(app, "ada@example.com")
    bob = add_user(app, "bob@example.com")
    return (
        add_token(app, admin, scopes=("read", "chat", "admin"))[1],
        add_token(app, ada)[1],
        add_token(app, bob)[1],
    )


def _names(app):
    with app.extensions["database"].session() as session:
        return sorted(session.scalars(select(McpServer.name)).all())


def test_an_admin_adds_lists_checks_approves_and_removes_a_server(app, client, rogue):
    admin, ada, _bob = _tokens(app)
    body = {"name": "weather", "url": f"{rogue}/mcp", "headers": {"Authorization": SECRET}}

    added = client.post("/api/admin/mcp-servers", json=body, **_as(client, admin))
    assert added.status_code == 201, added.get_json()
    view = added.get_json()
    assert view["tools"][0]["name"] == "lookup_weather" and view["scope"] == "everyone"
    assert view["headers"] == ["Authorization"] and SECRET not in added.get_data(as_text=True)

    listed = client.get("/api/admin/mcp-servers", **_as(client, admin)).get_json()
    assert [s["name"] for s in listed["servers"]] == ["weather"]
    assert client.get("/api/admin/mcp-servers", **_as(client, ada)).status_code == 403

    again = client.post("/api/admin/mcp-servers", json=body, **_as(client, admin))
    assert again.status_code == 409
    assert again.get_json()["error"]["code"] == "MCP_SERVER_REFUSED"

    httpx.post(f"{rogue}/rug", timeout=5)
    checked = client.post("/api/admin/mcp-servers/weather/check", **_as(client, admin))
    assert checked.get_json()["pending"] == ["lookup_weather"]
    approved = client.post("/api/admin/mcp-servers/weather/approve", json={}, **_as(client, admin))
    assert approved.get_json()["pending"] == []

    gone = client.delete("/api/admin/mcp-servers/weather", **_as(client, admin))
    assert gone.status_code == 204 and _names(app) == []
    missing = client.delete("/api/admin/mcp-servers/weather", **_as(client, admin))
    assert missing.status_code == 404


def test_a_persons_server_is_theirs_alone(app, client, rogue):
    _admin, ada, bob = _tokens(app)
    body = {"name": "mine", "url": f"{rogue}/mcp"}

    added = client.post("/api/mcp-servers", json=body, **_as(client, ada))
    assert added.status_code == 201, added.get_json()
    assert added.get_json()["scope"] == "personal"
    assert client.get("/api/mcp-servers", **_as(client, bob)).get_json() == {"servers": []}
    for path in ("/api/mcp-servers/mine/check", "/api/mcp-servers/mine/approve"):
        assert client.post(path, json={}, **_as(client, bob)).status_code == 404
    assert client.delete("/api/mcp-servers/mine", **_as(client, bob)).status_code == 404
    # Bob may have his own of the same name; the admin's name would clash for everyone.
    assert client.post("/api/mcp-servers", json=body, **_as(client, bob)).status_code == 201
    assert _names(app) == ["mine", "mine"]


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"name": "cmd", "command": "mcp-server-time"}, 400, "Only an admin"),
        ({"name": "inside", "url": "http://10.1.2.3:8080/mcp"}, 400, "private, loopback"),
        ({"name": "Bad Name", "url": "http://example.com/mcp"}, 400, "name"),
        ({"name": "creds", "url": "http://u:p@127.0.0.1:9/mcp"}, 400, "in a header"),
        ({"name": "garbage", "url": "ROGUE/seen"}, 400, "could not be listed"),
        ({"name": "hdr", "url": "ROGUE/mcp", "headers": {"Bad Header": "x"}}, 400, "header"),
    ],
)
def test_a_persons_bad_server_is_refused_and_nothing_is_saved(
    app, client, rogue, body, status, words
):
    _admin, ada, _bob = _tokens(app)
    if "url" in body:
        body = {**body, "url": body["url"].replace("ROGUE", rogue)}
    refused = client.post("/api/mcp-servers", json=body, **_as(client, ada))
    assert refused.status_code == status, refused.get_json()
    assert words in refused.get_json()["error"]["message"]
    assert _names(app) == []


def test_the_routes_are_in_the_openapi_document(client):
    paths = client.get("/api/openapi.json").get_json()["paths"]
    assert {"get", "post"} <= set(paths["/api/admin/mcp-servers"])
    assert "delete" in paths["/api/admin/mcp-servers/{name}"]
    assert {"get", "post"} <= set(paths["/api/mcp-servers"])
    assert "delete" in paths["/api/mcp-servers/{name}"]


@pytest.mark.parametrize("name", ["z%00x", "time%0A", "Not_A_Slug", "a" * 40])
def test_a_name_no_server_can_have_is_404_not_a_database_error(app, client, name):
    """Found by the route fuzzer on PostgreSQL, which refuses a NUL in a query."""
    admin, ada, _bob = _tokens(app)
    for method, path, token in (
        ("delete", f"/api/admin/mcp-servers/{name}", admin),
        ("post", f"/api/admin/mcp-servers/{name}/check", admin),
        ("delete", f"/api/mcp-servers/{name}", ada),
    ):
        response = getattr(client, method)(path, **_as(client, token))
        assert response.status_code == 404, (method, path, response.get_data(as_text=True))
