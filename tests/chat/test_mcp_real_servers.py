"""MCP servers nobody here wrote, installed by the project's own files: the reference
`server-everything` (npm, package.json; an older protocol revision, over stdio) and
`mcp-server-git` (PyPI, the dev lock). Their tools run in a chat through the same path as
any outside tool, a server's view of its environment holds no secret of ours, and an
older server's question mid-call is declined rather than left hanging."""

from __future__ import annotations

import json
import subprocess

import pytest

from app.config import PROJECT_ROOT
from tests.fake_model import Turn, text, tool_use

EVERYTHING = PROJECT_ROOT / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
ENV_SECRET = "sk-ant-env-secret-that-must-not-leak"


def _add(app, *args):
    result = app.test_cli_runner().invoke(args=["mcp", "add", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _ask_once(fake_model, call):
    def respond(body):
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return Turn(text("Done."))
        return Turn(tool_use(*call))

    fake_model.responder = respond


def _result_read_by_model(fake_model) -> dict:
    return fake_model.requests[1]["messages"][-1]["content"][0]


@pytest.mark.skipif(not EVERYTHING.exists(), reason="npm ci installs server-everything")
def test_server_everything_runs_and_sees_no_secret_of_ours(app, chat, fake_model, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_SECRET)
    output = _add(app, "everything", "--command", f"node {EVERYTHING} stdio")
    assert "tools" in output
    _ask_once(fake_model, ("mcp__everything__get-env", {}))
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "What is your environment?"), timeout=30)

    assert run["status"] == "completed", run
    offered = {tool["name"] for tool in fake_model.requests[0]["tools"]}
    assert {"mcp__everything__echo", "mcp__everything__get-sum"} <= offered
    seen = json.dumps(_result_read_by_model(fake_model))
    assert "PATH" in seen, "the server did report its environment"
    for secret in (ENV_SECRET, "test-secret", "test-key"):
        assert secret not in seen


@pytest.mark.skipif(not EVERYTHING.exists(), reason="npm ci installs server-everything")
def test_an_older_servers_question_is_declined_not_left_hanging(app, chat, fake_model):
    _add(app, "everything", "--command", f"node {EVERYTHING} stdio")
    _ask_once(fake_model, ("mcp__everything__trigger-elicitation-request", {}))
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "Ask me something"), timeout=30)

    assert run["status"] == "completed", run
    assert "decline" in json.dumps(_result_read_by_model(fake_model)).lower()


def test_mcp_server_git_reads_a_repository(app, chat, fake_model, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("hello\n")
    _add(app, "git", "--command", f"mcp-server-git --repository {repo}")
    _ask_once(fake_model, ("mcp__git__git_status", {"repo_path": str(repo)}))
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "What is the state of my repository?"), timeout=30)

    assert run["status"] == "completed", run
    seen = json.dumps(_result_read_by_model(fake_model))
    assert "notes.txt" in seen and "main" in seen
