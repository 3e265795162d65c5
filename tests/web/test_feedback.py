"""Feedback on an answer: a thumbs up or down with an optional comment, one per person per
row, kept with the run that wrote the row; refused clearly for anything but an answer."""

from __future__ import annotations

import html

import pytest
from sqlalchemy import select

from app.chat.feedback import AnswerFeedback
from app.chat.rows import insert_message
from tests.factories import AuthActions, ChatDriver, csrf_token_from
from tests.fake_model import Turn, text, tool_use


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


@pytest.fixture
def answered(app, chat, fake_model):
    """Ada's chat after one run: her message (1), the host's text with a tool call (2), the
    hidden tool result (3), the answer (4)."""
    fake_model.script(
        Turn(text("Let me look."), tool_use("list_offers", {})),
        Turn(text("You have no offers yet.")),
    )
    chat_id = chat.new_chat("Offers")
    run_id = chat.send(chat_id, "What do I sell?")
    assert chat.wait(run_id)["status"] == "completed"
    return {"id": chat_id, "run": run_id}


def _url(chat_id, sequence):
    return f"/api/chats/{chat_id}/messages/{sequence}/feedback"


def test_a_person_rates_an_answer_replaces_and_takes_it_back(app, chat, answered):
    chat_id = answered["id"]
    given = chat.post(_url(chat_id, 4), {"rating": -1, "comment": "  Too short.  "})
    assert given.status_code == 200, given.get_json()
    assert given.get_json() | {"updated_at": None} == {
        "sequence": 4,
        "rating": -1,
        "comment": "Too short.",
        "runId": answered["run"],
        "updated_at": None,
    }
    # A second replaces the first: still one, now a thumbs up without a comment.
    again = chat.post(_url(chat_id, 4), {"rating": 1})
    assert again.get_json()["rating"] == 1 and again.get_json()["comment"] is None
    with app.extensions["database"].session() as session:
        kept = session.scalars(select(AnswerFeedback)).all()
    assert [(f.sequence, f.rating, f.run_id) for f in kept] == [(4, 1, answered["run"])]
    # The row says so wherever rows are read.
    rows = {row["sequence"]: row for row in chat.rows(chat_id)}
    assert rows[4]["feedback"]["rating"] == 1
    assert "feedback" not in rows[2]

    cleared = chat.client.delete(_url(chat_id, 4), headers=chat.auth.headers())
    assert cleared.get_json() == {"cleared": True}
    assert chat.client.delete(_url(chat_id, 4), headers=chat.auth.headers()).get_json() == {
        "cleared": False
    }
    assert "feedback" not in {row["sequence"]: row for row in chat.rows(chat_id)}[4]


def test_only_an_answer_takes_feedback(app, chat, answered):
    chat_id = answered["id"]
    with app.extensions["database"].session() as session:
        card = insert_message(
            session,
            chat_id,
            role="assistant",
            kind="card",
            content="Which offer?",
            meta={"card": {"kind": "questionnaire", "tool": "ask", "toolUseId": "t1"}},
        )
        session.commit()
        card_sequence = card.sequence
    for sequence, what in ((1, "user"), (3, "tool_result"), (card_sequence, "card")):
        refused = chat.post(_url(chat_id, sequence), {"rating": 1})
        assert refused.status_code == 422, what
        error = refused.get_json()["error"]
        assert error["code"] == "NOT_AN_ANSWER"
        assert what in error["message"]
    missing = chat.post(_url(chat_id, 99), {"rating": 1})
    assert missing.status_code == 404
    assert missing.get_json()["error"]["code"] == "NOT_FOUND"
    assert chat.client.delete(_url(chat_id, 99), headers=chat.auth.headers()).status_code == 404
    with app.extensions["database"].session() as session:
        assert session.scalars(select(AnswerFeedback)).all() == []


@pytest.mark.parametrize(
    "body, field",
    [
        ({"rating": 2}, "rating"),
        ({"rating": 0}, "rating"),
        ({"rating": "1"}, "rating"),
        ({"rating": True}, "rating"),
        ({}, "rating"),
        ({"rating": 1, "comment": "x" * 2_001}, "comment"),
        ({"rating": 1, "comment": 5}, "comment"),
        ({"rating": 1, "mood": "sad"}, "mood"),
    ],
)
def test_bad_feedback_is_refused_naming_the_field(app, chat, answered, body, field):
    refused = chat.post(_url(answered["id"], 4), body)
    assert refused.status_code == 400, refused.get_json()
    error = refused.get_json()["error"]
    assert (error["code"], error["field"]) == ("INVALID_FIELD", field)


def test_someone_elses_answer_is_not_found(app, answered):
    client = app.test_client()
    bob = AuthActions(app, client)
    bob.create("bob@example.com")
    bob.login("bob@example.com")
    driver = ChatDriver(app, client, bob)
    assert driver.post(_url(answered["id"], 4), {"rating": 1}).status_code == 404
    assert client.delete(_url(answered["id"], 4), headers=bob.headers()).status_code == 404
    assert client.post(_url(answered["id"], 4), json={"rating": 1}).status_code == 400  # no CSRF


def test_the_rows_thumbs_rate_it_from_the_page(app, chat, answered):
    chat_id = answered["id"]
    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert 'id="m-4-feedback"' in page
    assert 'id="m-1-feedback"' not in page  # the person's own message
    token = csrf_token_from(page)
    url = f"/chats/{chat_id}/messages/4/feedback"
    down = chat.client.post(
        url, data={"rating": "-1", "csrf_token": token}, headers={"HX-Request": "true"}
    )
    block = html.unescape(down.get_data(as_text=True))
    assert down.status_code == 200
    assert 'class="link feedback-down" name="rating" value="0"' in block  # pressing it clears
    assert 'aria-pressed="true" aria-label="Bad answer"' in block
    assert "What was wrong?" in block and "autofocus" in block
    commented = chat.client.post(
        url, data={"rating": "-1", "comment": "It missed my offer.", "csrf_token": token}
    )
    assert "It missed my offer." in html.unescape(commented.get_data(as_text=True))
    page = html.unescape(chat.client.get(f"/chats/{chat_id}").get_data(as_text=True))
    assert 'class="feedback given" id="m-4-feedback"' in page
    assert "It missed my offer." in page
    cleared = chat.client.post(url, data={"rating": "0", "csrf_token": token})
    assert 'aria-pressed="true"' not in cleared.get_data(as_text=True)
    bad = chat.client.post(url, data={"rating": "7", "csrf_token": token})
    assert bad.status_code == 400
