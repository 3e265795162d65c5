"""The demo model walks a person through a real flow through the real loop and SDK."""

from app.workspace.seed import seed_workspace
from tests.waiting import eventually


def _wait(client, run_id):
    def ended():
        run = client.get(f"/api/runs/{run_id}").get_json()
        return run if run["status"] not in ("queued", "running") else None

    return eventually(ended, 10, f"run {run_id} never ended")


def test_demo_model_lists_asks_writes_and_presents(make_app, auth):
    app = make_app(model_provider="demo", anthropic_base_url=None)
    auth.app, auth.client = app, app.test_client()
    user_id = auth.create()
    with app.extensions["database"].session() as session:
        from app.accounts.models import User

        seed_workspace(session, session.get(User, user_id))
        session.commit()
    auth.login()
    client, headers = auth.client, auth.headers()
    assert b"Demo model" in client.get("/settings").data

    chat_id = client.post("/api/chats", json={}, headers=headers).get_json()["id"]
    run_id = client.post(
        f"/api/chats/{chat_id}/loop", json={"message": "Write me an ad"}, headers=headers
    ).get_json()["runId"]
    assert _wait(client, run_id)["status"] == "awaiting"
    rows = client.get(f"/api/chats/{chat_id}/messages").get_json()["messages"]
    assert "demo model" in rows[1]["content"].lower()
    card = rows[-1]["card"]
    offer_id = card["steps"][0]["options"][0]["value"]

    answer = {"toolResponse": {"toolUseId": card["toolUseId"], "result": {"offer_id": offer_id}}}
    run_id = client.post(f"/api/chats/{chat_id}/loop", json=answer, headers=headers).get_json()[
        "runId"
    ]
    assert _wait(client, run_id)["status"] == "completed"
    rows = client.get(f"/api/chats/{chat_id}/messages").get_json()["messages"]
    kinds = [r["kind"] for r in rows]
    assert "agent_output" in kinds
    output = next(r for r in rows if r["kind"] == "agent_output")["agentOutput"]
    assert output["agent"] == "ad-copy" and output["content"]["variants"]
    said = [r for r in rows if "demo model" in (r.get("content") or "").lower()]
    assert said == [rows[1]]  # said once in the chat, not again at the end
