"""Loopdesk as an MCP server, checked with the official SDK's client over a live server:
a bearer token is required, its scopes decide what is offered and run, the tools answer
what the JSON API answers (someone else's id is not found), outputs are resources, and
`ask` returns the reply of a real run."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import anyio
import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from app.config import PROJECT_ROOT
from app.workspace.models import Output
from tests.factories import add_offer, add_token, add_user
from tests.fake_model import Turn, text
from tests.live import LiveServer


@pytest.fixture
def served(make_app, fake_model):
    app = make_app(anthropic_base_url=fake_model.base_url)
    server = LiveServer(app).start()
    yield app, server
    server.stop()


def _session(url: str, token: str):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


def _run(url: str, token: str, work):
    """`work` with a connected client, on an event loop of its own thread (whatever loop
    this thread may hold)."""

    async def main():
        async with _session(url, token) as client:
            return await work(client)

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, main).result(timeout=120)


def test_the_sdk_client_reads_the_workspace_with_a_read_token(served):
    app, server = served
    ada, bob = add_user(app, "ada@example.com"), add_user(app, "bob@example.com")
    mine, theirs = add_offer(app, ada, "Calm Mornings"), add_offer(app, bob, "Bob's offer")
    with app.extensions["database"].session() as session:
        session.add(Output(user_id=ada, agent="quiz", title="Morning quiz", content={"q": 1}))
        session.commit()
    token = add_token(app, ada, scopes=("read",))[1]

    async def work(client):
        tools = [tool.name for tool in (await client.list_tools()).tools]
        listed = await client.call_tool("list_offers", {})
        one = await client.call_tool("get_offer", {"offer_id": mine})
        foreign = await client.call_tool("get_offer", {"offer_id": theirs})
        asked = await client.call_tool("ask", {"message": "Hi"})
        resources = (await client.list_resources()).resources
        read = await client.read_resource(str(resources[0].uri))
        return tools, listed, one, foreign, asked, resources, read

    tools, listed, one, foreign, asked, resources, read = _run(server.url, token, work)
    assert "list_offers" in tools and "search_chats" in tools
    assert "ask" not in tools, "a read token is not offered what it may not do"
    assert [item["name"] for item in listed.structured_content["items"]] == ["Calm Mornings"]
    assert one.structured_content["id"] == mine and not one.is_error
    assert foreign.is_error and "Not found" in foreign.content[0].text
    assert asked.is_error and "'chat' scope" in asked.content[0].text
    assert [resource.name for resource in resources] == ["Morning quiz"]
    assert '"Morning quiz"' in read.contents[0].text


def test_ask_answers_with_the_reply_of_a_real_run(served, fake_model):
    app, server = served
    ada = add_user(app, "ada@example.com")
    token = add_token(app, ada, scopes=("read", "chat"))[1]
    fake_model.script(Turn(text("Here are three hooks for your offer.")))

    async def work(client):
        return await client.call_tool("ask", {"message": "Give me hooks"})

    asked = _run(server.url, token, work)
    assert not asked.is_error, asked.content
    reply = asked.structured_content
    assert reply["status"] == "completed"
    assert reply["answer"] == "Here are three hooks for your offer."
    assert reply["url"].endswith(f"/chats/{reply['chat_id']}")
    messages = fake_model.requests[0]["messages"]
    assert messages[-1]["content"][0]["text"] == "Give me hooks" or "Give me hooks" in str(
        messages[-1]
    )


def test_no_token_or_another_origin_is_refused(served):
    app, server = served
    ada = add_user(app, "ada@example.com")
    token = add_token(app, ada)[1]
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}

    anonymous = httpx.post(f"{server.url}/mcp", json=discover, timeout=5)
    assert anonymous.status_code == 401 and "Bearer" in anonymous.headers["WWW-Authenticate"]
    elsewhere = httpx.post(
        f"{server.url}/mcp",
        json=discover,
        headers={"Authorization": f"Bearer {token}", "Origin": "https://evil.example"},
        timeout=5,
    )
    assert elsewhere.status_code == 403
    unknown = httpx.post(
        f"{server.url}/mcp",
        json={**discover, "method": "nothing/here"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=5,
    )
    assert unknown.json()["error"]["code"] == -32601


def test_a_browser_session_is_no_mcp_client(client, auth):
    auth.create()
    auth.login()
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    refused = client.post("/mcp", json=message, headers=auth.headers())
    assert refused.status_code == 401


INSPECTOR = PROJECT_ROOT / "node_modules/@modelcontextprotocol/inspector-cli/build"


@pytest.mark.skipif(not INSPECTOR.exists(), reason="npm ci installs inspector-cli")
def test_the_inspector_cli_lists_and_calls_the_tools(served):
    """The official inspector's command line (TypeScript SDK, an older revision)."""
    app, server = served
    ada = add_user(app, "ada@example.com")
    offer = add_offer(app, ada, "Calm Mornings")
    token = add_token(app, ada)[1]

    def inspector(*args: str) -> str:
        command = ["node", "index.js", f"{server.url}/mcp"]
        command += ["--header", f"Authorization: Bearer {token}", *args]
        # It reads its own package.json relative to the working directory.
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=INSPECTOR)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert '"name": "search_chats"' in inspector("--method", "tools/list")
    called = inspector(
        "--method", "tools/call", "--tool-name", "get_offer", "--tool-arg", f"offer_id={offer}"
    )
    assert "Calm Mornings" in called and '"isError": false' in called
