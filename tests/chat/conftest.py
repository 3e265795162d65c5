"""A chat app wired to the fake model server, and a driver that talks to it as a script
would (JSON API with a logged-in browser session)."""

from __future__ import annotations

import time

import pytest

from app.chat.models import ACTIVE_RUN_STATUSES


class ChatDriver:
    def __init__(self, app, client, auth):
        self.app = app
        self.client = client
        self.auth = auth

    def post(self, url, body):
        return self.client.post(url, json=body, headers=self.auth.headers())

    def new_chat(self, title=None) -> int:
        response = self.post("/api/chats", {"title": title} if title else {})
        assert response.status_code == 201, response.get_json()
        return response.get_json()["id"]

    def send(self, chat_id, message) -> int:
        response = self.post(f"/api/chats/{chat_id}/loop", {"message": message})
        assert response.status_code == 202, response.get_json()
        return response.get_json()["runId"]

    def answer(self, chat_id, tool_use_id, result):
        return self.post(
            f"/api/chats/{chat_id}/loop",
            {"toolResponse": {"toolUseId": tool_use_id, "result": result}},
        )

    def wait(self, run_id, timeout=15.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.client.get(f"/api/runs/{run_id}").get_json()
            if run["status"] not in ACTIVE_RUN_STATUSES:
                return run
            time.sleep(0.02)
        raise TimeoutError(f"run {run_id} still {run['status']}")

    def rows(self, chat_id, after=0) -> list[dict]:
        response = self.client.get(f"/api/chats/{chat_id}/messages?after={after}")
        assert response.status_code == 200
        return response.get_json()["messages"]


@pytest.fixture
def app(make_app, fake_model):
    """In these tests the app talks to the fake model server."""
    return make_app(anthropic_base_url=fake_model.base_url)


@pytest.fixture
def chat(app, auth):
    auth.create()
    auth.login()
    return ChatDriver(app, auth.client, auth)
