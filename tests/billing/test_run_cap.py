"""At most `max_concurrent_runs` runs in flight per person across their conversations:
one more is 429 TOO_MANY_RUNS with Retry-After, and nothing of it is persisted."""

from __future__ import annotations

import threading

import pytest

from tests.billing import counts
from tests.factories import AuthActions, set_allowance
from tests.fake_model import Turn, text

CAP = 2


@pytest.fixture
def app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, max_concurrent_runs=CAP)


@pytest.fixture
def held_model(fake_model):
    """Every reply waits until the test lets it go, so runs stay in flight."""
    release = threading.Event()

    def reply(_body):
        release.wait(20)
        return Turn(text("Done."))

    fake_model.responder = reply
    yield release
    release.set()


def _busy_chats(chat, fake_model, n):
    chat_ids, run_ids = [], []
    for number in range(n):
        chat_id = chat.new_chat()
        chat_ids.append(chat_id)
        run_ids.append(chat.send(chat_id, f"Long job {number}"))
    fake_model.wait_for_requests(n)
    return chat_ids, run_ids


def test_one_run_past_the_cap_gets_429_with_retry_after(app, chat, fake_model, held_model):
    _, run_ids = _busy_chats(chat, fake_model, CAP)
    third = chat.new_chat()

    refused = chat.post(f"/api/chats/{third}/loop", {"message": "And this"})

    assert refused.status_code == 429
    assert refused.get_json()["error"]["code"] == "TOO_MANY_RUNS"
    assert "replies being written in other chats" in refused.get_json()["error"]["message"]
    assert 0 < int(refused.headers["Retry-After"]) <= 10
    assert counts(app, third) == (0, 0)

    # Once one finishes, the same message goes through.
    held_model.set()
    for run_id in run_ids:
        assert chat.wait(run_id)["status"] == "completed"
    assert chat.wait(chat.send(third, "And this"))["status"] == "completed"


def test_a_stopped_run_frees_its_place(app, chat, fake_model, held_model):
    chat_ids, _ = _busy_chats(chat, fake_model, CAP)
    third = chat.new_chat()
    assert chat.post(f"/api/chats/{third}/loop", {"message": "x"}).status_code == 429

    assert chat.post(f"/api/chats/{chat_ids[0]}/stop", {}).status_code == 200

    assert chat.post(f"/api/chats/{third}/loop", {"message": "x"}).status_code == 202


def test_the_same_chat_still_answers_409(app, chat, fake_model, held_model):
    chat_ids, _ = _busy_chats(chat, fake_model, CAP)
    response = chat.post(f"/api/chats/{chat_ids[0]}/loop", {"message": "again"})
    assert response.status_code == 409
    assert response.get_json()["error"]["code"] == "RUN_IN_FLIGHT"


def test_a_turn_refused_for_several_reasons_gives_the_nearest_one(
    app, chat, fake_model, held_model
):
    """The chat's own run in flight (409), then the monthly allowance (402), then the cap
    on runs in other chats (429): what the person can act on first."""
    chat_ids, _ = _busy_chats(chat, fake_model, CAP)
    third = chat.new_chat()
    set_allowance(app, chat.user_id, 0)

    busy = chat.post(f"/api/chats/{chat_ids[0]}/loop", {"message": "again"})
    over_allowance = chat.post(f"/api/chats/{third}/loop", {"message": "new"})
    set_allowance(app, chat.user_id, None)
    over_cap = chat.post(f"/api/chats/{third}/loop", {"message": "new"})

    codes = [r.get_json()["error"]["code"] for r in (busy, over_allowance, over_cap)]
    assert codes == ["RUN_IN_FLIGHT", "QUOTA_EXCEEDED", "TOO_MANY_RUNS"]
    assert [busy.status_code, over_allowance.status_code, over_cap.status_code] == [409, 402, 429]
    assert counts(app, third) == (0, 0)


def test_the_cap_is_per_person(app, chat, fake_model, held_model):
    _busy_chats(chat, fake_model, CAP)
    bob = AuthActions(app, app.test_client())
    bob.create("bob@example.com")
    bob.login("bob@example.com")
    chat_id = bob.client.post("/api/chats", json={}, headers=bob.headers()).get_json()["id"]
    response = bob.client.post(
        f"/api/chats/{chat_id}/loop", json={"message": "mine"}, headers=bob.headers()
    )
    assert response.status_code == 202


def test_the_chat_page_shows_the_cap_in_the_banner(app, chat, fake_model, held_model):
    _busy_chats(chat, fake_model, CAP)
    third = chat.new_chat()

    response = chat.client.post(
        f"/chats/{third}/messages",
        data={"message": "Third job", "csrf_token": chat.auth.csrf},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) > 0
    html = response.get_data(as_text=True)
    assert 'id="banner"' in html and "replies being written in other chats" in html
    assert "Third job</textarea>" in html
    assert counts(app, third) == (0, 0)


def test_messages_sent_at_once_to_different_chats_never_pass_the_cap(
    app, chat, fake_model, held_model
):
    chats = [chat.new_chat() for _ in range(5)]
    cookie = chat.client.get_cookie("session")
    barrier = threading.Barrier(len(chats))
    statuses = []

    def post(chat_id):
        client = app.test_client()
        client.set_cookie("session", cookie.value)
        barrier.wait()
        response = client.post(
            f"/api/chats/{chat_id}/loop", json={"message": "go"}, headers=chat.auth.headers()
        )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=post, args=(chat_id,)) for chat_id in chats]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses) == [202] * CAP + [429] * (len(chats) - CAP)
