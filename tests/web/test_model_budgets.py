"""Budgets on every route that calls a model or starts work: memory instruct and import,
the settings import and /welcome share RATE_LIMIT_MODEL_WORK per person (429
`RATE_LIMITED` with Retry-After); a card answered on the page spends the message limit
(RATE_LIMIT_MESSAGES) like sending does; onboarding runs through a bounded pool, one job
per account."""

from __future__ import annotations

import json

import pytest

from app.agents.onboarding import starter_writers
from tests.factories import AuthActions, ChatDriver
from tests.fake_model import Turn, text, tool_use
from tests.waiting import eventually
from tests.web.helpers import json_error

HTMX = {"HX-Request": "true"}


@pytest.fixture
def app(make_app, fake_model):
    return make_app(
        anthropic_base_url=fake_model.base_url,
        rate_limit_model_work="2 per 10 minutes",
        rate_limit_messages="2 per 10 minutes",
    )


def _ops(*operations) -> Turn:
    return Turn(text(json.dumps({"operations": list(operations)})))


def _add(fact: str) -> Turn:
    return _ops({"op": "add", "fact": fact, "reason": "stated"})


def test_memory_instruct_past_the_budget_is_429_and_calls_no_model(
    app, client, auth, user, fake_model
):
    fake_model.script(_add("Likes green."), _add("Likes blue."))
    for colour in ("green", "blue"):
        response = client.post(
            "/api/memory/instruct", json={"text": f"I like {colour}"}, headers=auth.headers()
        )
        assert response.status_code == 200, response.get_data(as_text=True)
    calls = len(fake_model.requests)
    refused = client.post(
        "/api/memory/instruct", json={"text": "I like red"}, headers=auth.headers()
    )
    assert json_error(refused, 429) == "RATE_LIMITED"
    assert "Too many requests that call the model" in refused.get_json()["error"]["message"]
    assert 0 < int(refused.headers["Retry-After"]) <= 600
    assert len(fake_model.requests) == calls
    memories = client.get("/api/memory").get_json()["memories"]
    assert sorted(memories) == ["Likes blue.", "Likes green."]


def test_instruct_import_and_the_settings_import_share_one_budget(
    app, client, auth, user, fake_model
):
    fake_model.script(_add("Runs a bakery."), _add("Sells bread."))
    assert (
        client.post(
            "/api/memory/import", json={"text": "I run a bakery."}, headers=auth.headers()
        ).status_code
        == 200
    )
    assert (
        client.post(
            "/settings/import",
            data={"text": "I sell bread.", "csrf_token": auth.csrf},
            headers=HTMX,
        ).status_code
        == 200
    )
    refused = client.post(
        "/api/memory/instruct", json={"text": "I like rye"}, headers=auth.headers()
    )
    assert json_error(refused, 429) == "RATE_LIMITED"
    page_refused = client.post(
        "/settings/import", data={"text": "More.", "csrf_token": auth.csrf}, headers=HTMX
    )
    assert page_refused.status_code == 429
    assert page_refused.headers["HX-Retarget"] == "#banner"
    assert "Too many requests that call the model" in page_refused.get_data(as_text=True)


def test_budgets_are_per_person(app, client, auth, user, fake_model):
    fake_model.script(_add("A."), _add("B."), _add("C."))
    for n in range(2):
        client.post("/api/memory/instruct", json={"text": f"fact {n}"}, headers=auth.headers())
    bob_client = app.test_client()
    bob = AuthActions(app, bob_client)
    bob.create("bob@example.com")
    bob.login("bob@example.com")
    response = bob_client.post(
        "/api/memory/instruct", json={"text": "I am Bob"}, headers=bob.headers()
    )
    assert response.status_code == 200


def _sign_up(client, email="new@example.com"):
    from tests.factories import csrf_token_from
    from tests.web.helpers import sign_up

    sign_up(client, email)  # signs up, then logs in

    return csrf_token_from(client.get("/welcome").get_data(as_text=True))


STARTERS = [{"title": f"Starter {n}", "prompt": f"Write thing {n} for my offer."} for n in range(3)]


def test_welcome_posts_spend_the_budget_but_skip_does_not(app, client, fake_model):
    csrf = _sign_up(client)
    for _ in range(3):
        assert (
            client.post("/welcome", data={"action": "skip", "csrf_token": csrf}).status_code == 302
        )
    fake_model.script(
        Turn(text(json.dumps({"starters": STARTERS}))),
        Turn(text(json.dumps({"starters": STARTERS}))),
    )
    form = {"role": "Founder", "company": "Acme", "csrf_token": csrf}
    assert client.post("/welcome", data=form).status_code == 302
    _wait_idle(app, client)
    assert client.post("/welcome", data=form).status_code == 302
    _wait_idle(app, client)
    refused = client.post("/welcome", data=form)
    assert refused.status_code == 429
    assert "Too many requests that call the model" in refused.get_data(as_text=True)


def _wait_idle(app, client):
    from app.accounts.models import User
    from tests.web.helpers import database

    with database(app).session() as session:
        user_id = session.query(User.id).filter_by(email="new@example.com").scalar()
    writers = starter_writers(app.config["LOOPDESK"].onboarding_threads)
    eventually(lambda: not writers.is_running(user_id), 10, "the starters were still being written")


def test_onboarding_runs_one_job_per_account(make_app, fake_model):
    """Posting /welcome again while its starters are being written starts no second
    model call: the job under way is the only one."""
    app = make_app(anthropic_base_url=fake_model.base_url)
    client = app.test_client()
    csrf = _sign_up(client)
    fake_model.script(Turn(text(json.dumps({"starters": STARTERS})), delay_first=1.5))
    form = {"role": "Founder", "company": "Acme", "csrf_token": csrf}
    for _ in range(5):
        assert client.post("/welcome", data=form).status_code == 302
    _wait_idle(app, client)
    assert len(fake_model.requests) == 1
    partial = client.get("/welcome/starters").get_data(as_text=True)
    assert "Starter 0" in partial


def test_a_card_answered_on_the_page_spends_the_message_limit(app, client, auth, fake_model):
    auth.create()
    auth.login()
    chat = ChatDriver(app, client, auth)
    fake_model.script(
        Turn(
            text("One question first."),
            tool_use("ask_user", {"question": "Which colour?"}, id="toolu_colour"),
        )
    )
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "Help me"))  # the first message of two
    assert run["status"] == "awaiting", run
    other = chat.new_chat()
    fake_model.script(Turn(text("Hello.")))
    chat.wait(chat.send(other, "And hello"))  # the second: the limit is reached
    answer = client.post(
        f"/chats/{chat_id}/cards/toolu_colour",
        data={"answer": "Green", "csrf_token": auth.csrf},
        headers=HTMX,
    )
    assert answer.status_code == 429
    assert "Too many messages" in answer.get_data(as_text=True)
    assert int(answer.headers["Retry-After"]) > 0
    rows = chat.rows(chat_id)
    assert rows[-1]["kind"] == "card" and rows[-1]["card"]["status"] == "awaiting"


def test_the_onboarding_pool_is_bounded(monkeypatch):
    """One thread: it writes one account's starters, eight more accounts wait, the tenth
    is turned away (its person gets the default starters); an account already queued is
    never queued twice; once the work is done the pool takes more."""
    import threading

    import app.agents.onboarding as onboarding

    release = threading.Event()
    written = []

    def slow_job(services, database, user_id):
        release.wait(10)
        written.append(user_id)

    monkeypatch.setattr(onboarding, "generate_and_store", slow_job)
    writers = onboarding.StarterWriters(1)
    futures = [writers.submit(None, None, user_id) for user_id in range(1, 10)]
    assert all(future is not None for future in futures)
    assert writers.submit(None, None, 10) is None
    assert writers.submit(None, None, 3) is None
    release.set()
    for future in futures:
        future.result(timeout=10)
    assert sorted(written) == list(range(1, 10))
    assert writers.submit(None, None, 10) is not None
