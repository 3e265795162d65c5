"""The monthly allowance is checked before anything is persisted or enqueued: a person over
it gets 402 QUOTA_EXCEEDED, as JSON for scripts and as a visible message in the page."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.billing.models import UsageEvent
from app.billing.quota import month_of
from app.chat.models import Conversation
from tests.billing import counts, metered
from tests.factories import set_allowance
from tests.fake_model import Turn, tool_use


def _spend(app, user_id, credits, month=None, key="spent"):
    """Usage already on the books (as an earlier run would have metered it)."""
    with app.extensions["database"].session() as session:
        session.add(
            UsageEvent(
                idempotency_key=key,
                user_id=user_id,
                model="claude-sonnet-5-5",
                credits=credits,
                month=month or month_of(),
            )
        )
        session.commit()


def _conversation_status(app, chat_id):
    with app.extensions["database"].session() as session:
        return session.get(Conversation, chat_id).status


def test_a_person_over_their_allowance_gets_402_and_nothing_is_enqueued(app, chat, fake_model):
    fake_model.script("First answer.")
    chat_id = chat.new_chat()
    set_allowance(app, chat.user_id, 2)
    # The first run uses the whole allowance (a run costs 2 credits with the default weight).
    assert chat.wait(chat.send(chat_id, "Hello"))["status"] == "completed"
    assert sum(e.credits for e in metered(app, chat.user_id, 1)) == 2
    before = counts(app, chat_id)

    refused = chat.post(f"/api/chats/{chat_id}/loop", {"message": "One more"})

    assert refused.status_code == 402
    error = refused.get_json()["error"]
    assert error["code"] == "QUOTA_EXCEEDED"
    assert "monthly allowance" in error["message"] and "renews on 1 " in error["message"]
    assert counts(app, chat_id) == before, "no row and no run"
    assert _conversation_status(app, chat_id) == "IDLE"
    assert len(fake_model.requests) == 1, "the model was not called again"
    assert [r["content"] for r in chat.rows(chat_id) if r["kind"] == "user"] == ["Hello"]


def test_a_card_answer_over_the_allowance_is_refused_and_the_card_keeps_waiting(
    app, chat, fake_model
):
    fake_model.script(Turn(tool_use("ask_user", {"question": "Which tone?"}, id="toolu_tone")))
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Write an ad"))["status"] == "awaiting"
    metered(app, chat.user_id, 1)
    set_allowance(app, chat.user_id, 2)
    before = counts(app, chat_id)

    refused = chat.answer(chat_id, "toolu_tone", {"text": "Warm"})

    assert refused.status_code == 402
    assert refused.get_json()["error"]["code"] == "QUOTA_EXCEEDED"
    assert counts(app, chat_id) == before
    assert chat.rows(chat_id)[-1]["card"]["status"] == "awaiting"

    # Raised by an admin: the same answer goes through.
    set_allowance(app, chat.user_id, 10)
    fake_model.script("A warm ad it is.")
    response = chat.answer(chat_id, "toolu_tone", {"text": "Warm"})
    assert response.status_code == 202
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"


def test_usage_of_earlier_months_does_not_count(app, chat, fake_model):
    set_allowance(app, chat.user_id, 5)
    _spend(app, chat.user_id, 500, month="2020-01")
    fake_model.script("Fresh month.")
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Hello"))["status"] == "completed"


def test_no_allowance_means_unlimited(app, chat, fake_model):
    _spend(app, chat.user_id, 1_000_000)
    fake_model.script("Unlimited.")
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Hello"))["status"] == "completed"


def test_an_allowance_of_zero_refuses_the_first_message(app, chat):
    set_allowance(app, chat.user_id, 0)
    chat_id = chat.new_chat()
    response = chat.post(f"/api/chats/{chat_id}/loop", {"message": "Hello"})
    assert response.status_code == 402
    assert counts(app, chat_id) == (0, 0)


def test_the_chat_page_shows_the_refusal_and_keeps_the_draft(app, chat):
    chat_id = chat.new_chat()
    set_allowance(app, chat.user_id, 1)
    _spend(app, chat.user_id, 1)

    response = chat.client.post(
        f"/chats/{chat_id}/messages",
        data={"message": "Draft I wrote", "csrf_token": chat.auth.csrf},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 402
    html = response.get_data(as_text=True)
    banner = re.search(r'<div id="banner"[^>]*hx-swap-oob="true"[^>]*>(.*?)</div>', html, re.S)
    assert banner and "banner-shown" in html and 'role="alert"' in html
    assert "You have used all 1 credits of your monthly allowance" in banner.group(1)
    assert "Draft I wrote</textarea>" in html, "the composer keeps what they wrote"
    assert counts(app, chat_id) == (0, 0)

    # Without htmx (a plain form post) the message is on the error page.
    plain = chat.client.post(
        f"/chats/{chat_id}/messages", data={"message": "Again", "csrf_token": chat.auth.csrf}
    )
    assert plain.status_code == 402
    assert "monthly allowance" in plain.get_data(as_text=True)
    assert counts(app, chat_id) == (0, 0)


def test_a_card_answered_in_the_page_shows_the_refusal_on_the_card(app, chat, fake_model):
    fake_model.script(Turn(tool_use("ask_user", {"question": "Which tone?"}, id="toolu_tone")))
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Write an ad"))["status"] == "awaiting"
    metered(app, chat.user_id, 1)
    set_allowance(app, chat.user_id, 2)
    before = counts(app, chat_id)

    response = chat.client.post(
        f"/chats/{chat_id}/cards/toolu_tone",
        data={"csrf_token": chat.auth.csrf, "answer": "Warm"},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 402
    html = response.get_data(as_text=True)
    assert "monthly allowance" in html and "Which tone?" in html
    assert counts(app, chat_id) == before


def test_a_starter_refused_for_quota_leaves_no_chat_behind(app, chat):
    set_allowance(app, chat.user_id, 0)
    with app.extensions["database"].session() as session:
        chats_before = session.scalar(select(func.count(Conversation.id)))

    response = chat.client.post(
        "/chats/start",
        data={"message": "Write a quiz", "csrf_token": chat.auth.csrf},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 402
    assert response.headers["HX-Retarget"] == "#banner"
    assert "monthly allowance" in response.get_data(as_text=True)
    with app.extensions["database"].session() as session:
        assert session.scalar(select(func.count(Conversation.id))) == chats_before
