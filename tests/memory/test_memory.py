"""Memory: one reconcile path (model or rules), caps, history, concurrency, the prompt."""

from __future__ import annotations

import json
import re
import threading

import pytest
from sqlalchemy import select

from app.memory.models import MemoryChange
from app.memory.store import MAX_FACTS, Operation, apply_operations, read_memory, reconcile
from tests.factories import AuthActions, ChatDriver
from tests.fake_model import Turn, api_error, text


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


@pytest.fixture
def ada(app, auth):
    user_id = auth.create()
    auth.login()
    return user_id


def _ops(*operations):
    return Turn(text(json.dumps({"operations": list(operations)})))


def _instruct(client, auth, text_, path="/api/memory/instruct"):
    return client.post(path, json={"text": text_}, headers=auth.headers())


def _memory(client):
    return client.get("/api/memory").get_json()


def _history(app, user_id):
    with app.extensions["database"].session() as session:
        return [
            (c.action, c.fact, c.replaced_by, c.source)
            for c in session.scalars(
                select(MemoryChange)
                .where(MemoryChange.user_id == user_id)
                .order_by(MemoryChange.id)
            )
        ]


def test_the_model_adds_merges_supersedes_and_forgets(app, client, auth, ada, fake_model):
    fake_model.script(
        _ops({"op": "add", "fact": "Prefers short headlines.", "reason": "stated"}),
        _ops({"op": "add", "fact": "Prefers short headlines", "reason": "again"}),
        _ops(
            {
                "op": "replace",
                "fact": "Prefers short headlines.",
                "new_fact": "Prefers long headlines.",
                "reason": "changed mind",
            }
        ),
        _ops({"op": "forget", "fact": "Prefers long headlines.", "reason": "asked"}),
    )
    assert _instruct(client, auth, "I like short headlines").get_json()["memories"] == [
        "Prefers short headlines."
    ]
    assert _memory(client)["memories"] == ["Prefers short headlines."]  # the duplicate merged
    _instruct(client, auth, "I like short headlines")
    assert _memory(client)["memories"] == ["Prefers short headlines."]
    _instruct(client, auth, "Actually, long headlines please")
    assert _memory(client)["memories"] == ["Prefers long headlines."]
    _instruct(client, auth, "Forget the headline thing")
    assert _memory(client)["memories"] == []
    assert _history(app, ada) == [
        ("added", "Prefers short headlines.", None, "api"),
        ("superseded", "Prefers short headlines.", "Prefers long headlines.", "api"),
        ("forgotten", "Prefers long headlines.", None, "api"),
    ]


@pytest.mark.parametrize(
    "failure",
    [
        api_error(500, "api_error"),
        Turn(text("Sure! I will remember that.")),
        Turn(text('{"operations": [{"op": "explode"}]}')),
    ],
    ids=["http-error", "not-json", "bad-shape"],
)
def test_rules_take_over_when_the_model_fails(app, client, auth, ada, fake_model, failure):
    fake_model.responder = lambda body: failure
    response = _instruct(client, auth, "Remember that my brand colour is green")
    assert response.status_code == 200
    assert _memory(client)["memories"] == ["My brand colour is green"]
    _instruct(client, auth, "remember that my brand colour is green.")  # a near duplicate
    assert _memory(client)["memories"] == ["My brand colour is green"]
    _instruct(client, auth, "Forget that my brand colour is green")
    assert _memory(client)["memories"] == []


def test_over_the_cap_is_refused_and_nothing_is_saved(app, client, auth, ada, fake_model):
    facts = [f"Fact number {n} about the person." for n in range(MAX_FACTS)]
    assert (
        client.put("/api/memory", json={"memories": facts}, headers=auth.headers()).status_code
        == 200
    )
    fake_model.script(_ops({"op": "add", "fact": "One fact too many."}))
    response = _instruct(client, auth, "One more thing")
    assert response.status_code == 400
    assert "limit is 50" in response.get_json()["error"]["message"]
    assert len(_memory(client)["memories"]) == MAX_FACTS
    fake_model.responder = lambda body: api_error(500)
    assert _instruct(client, auth, "Remember that I surf").status_code == 400  # fallback: same cap
    long_fact = "x" * 300
    assert _instruct(client, auth, f"Remember that {long_fact}").status_code == 400


def test_the_host_prompt_carries_instructions_and_current_facts(app, client, auth, ada, fake_model):
    client.put(
        "/api/memory",
        json={
            "instructions": "Always answer in British English.",
            "memories": ["Runs a coffee roastery."],
        },
        headers=auth.headers(),
    )
    fake_model.script(
        _ops({"op": "replace", "fact": "Runs a coffee roastery.", "new_fact": "Runs a tea shop."})
    )
    _instruct(client, auth, "I sold the roastery, I run a tea shop now")
    driver = ChatDriver(app, client, auth)
    fake_model.script("Noted.")
    driver.wait(driver.send(driver.new_chat(), "Hello"))
    system = fake_model.requests[-1]["system"]
    assert "Always answer in British English." in system
    assert "Runs a tea shop." in system and "coffee roastery" not in system
    # Stable parts first: the host prompt, then the tools, then the person.
    assert (
        system.index("You are Loopdesk")
        < system.index("What you can do right now")
        < system.index("British English")
    )


@pytest.mark.timeout(120)
def test_ten_concurrent_instructions_all_land(app, ada, auth, fake_model):
    def respond(body):
        new = body["messages"][0]["content"].split("New text:\n", 1)[1]
        return _ops({"op": "add", "fact": f"Likes {new}."})

    fake_model.responder = respond
    cookie = auth.client.get_cookie("session").value
    statuses = []

    def send(n):
        client = app.test_client()
        client.set_cookie("session", cookie)
        statuses.append(
            client.post(
                "/api/memory/instruct", json={"text": f"colour {n}"}, headers=auth.headers()
            ).status_code
        )

    threads = [threading.Thread(target=send, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert statuses == [200] * 10
    with app.extensions["database"].session() as session:
        _, facts = read_memory(session, ada)
    assert sorted(facts) == sorted(f"Likes colour {n}." for n in range(10))
    assert sorted(c[1] for c in _history(app, ada)) == sorted(facts)


def test_someone_elses_memory_is_unreachable(app, client, auth, ada, fake_model):
    client.put("/api/memory", json={"memories": ["Ada's secret plan."]}, headers=auth.headers())
    bob_client = app.test_client()
    bob = AuthActions(app, bob_client)
    bob.create("bob@example.com")
    bob.login("bob@example.com")
    assert bob_client.get("/api/memory").get_json() == {"instructions": "", "memories": []}
    assert "secret" not in bob_client.get("/api/memory").get_data(as_text=True)


@pytest.mark.parametrize(
    "body",
    [
        {"instructions": 5},
        {"instructions": "x" * 4001},
        {"memories": "not a list"},
        {"memories": [1, 2]},
        {"memories": ["x" * 281]},
        {"memories": [f"f{n}" for n in range(51)]},
        {"other": 1},
    ],
)
def test_bad_memory_edits_are_400_and_change_nothing(app, client, auth, ada, body):
    client.put(
        "/api/memory",
        json={"instructions": "Keep it short.", "memories": ["Likes tea."]},
        headers=auth.headers(),
    )
    response = client.put("/api/memory", json=body, headers=auth.headers())
    assert response.status_code == 400 and response.get_json()["error"]["code"]
    assert _memory(client) == {"instructions": "Keep it short.", "memories": ["Likes tea."]}


@pytest.mark.parametrize(
    "body", [{}, {"text": ""}, {"text": 3}, {"text": "x" * 20_001}, {"text": "ok", "x": 1}]
)
def test_bad_instruct_bodies_are_400(app, client, auth, ada, body):
    response = client.post("/api/memory/instruct", json=body, headers=auth.headers())
    assert response.status_code == 400
    assert _memory(client) == {"instructions": "", "memories": []}


def test_memory_api_needs_a_login(app):
    client = app.test_client()
    assert client.get("/api/memory").status_code == 401
    assert client.post("/api/memory/instruct", json={"text": "hi"}).status_code == 401
    assert re.search("UNAUTHORIZED", client.put("/api/memory", json={}).get_data(as_text=True))


def test_agents_see_the_persons_instructions(app, client, auth, ada, fake_model):
    from tests.factories import QUIZ
    from tests.fake_model import tool_use

    client.put(
        "/api/memory", json={"instructions": "Never promise discounts."}, headers=auth.headers()
    )
    fake_model.script(
        Turn(tool_use("quiz", {"instructions": "A morning quiz"})),
        Turn(text(json.dumps(QUIZ))),
        Turn(text("Done.")),
    )
    driver = ChatDriver(app, client, auth)
    driver.wait(driver.send(driver.new_chat(), "Quiz please"))
    agent_call = next(r for r in fake_model.requests if r["tool_choice"]["type"] == "tool")
    assert "Never promise discounts." in agent_call["messages"][0]["content"]


def test_reconcile_commits_nothing_of_its_callers_transaction(app, ada, fake_model):
    """The caller commits: a reconcile inside a transaction that is then rolled back
    leaves neither the caller's earlier write nor the new fact behind."""
    services = app.extensions["services"]
    fake_model.script(_ops({"op": "add", "fact": "Sells pottery.", "reason": "stated"}))
    with app.extensions["database"].session() as session:
        typed = [Operation("add", "Likes blue.", reason="typed")]
        apply_operations(session, ada, typed, source="settings", actor_id=ada)
        outcome = reconcile(
            session, services.model, "fast", ada, "I sell pottery", source="settings"
        )
        assert outcome.facts == ["Likes blue.", "Sells pottery."]
        session.rollback()
    with app.extensions["database"].session() as session:
        assert read_memory(session, ada)[1] == []
    assert _history(app, ada) == []
