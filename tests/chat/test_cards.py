"""Pause and resume: UI tools show a card, the run ends awaiting, an answer resumes it."""

from __future__ import annotations

import json
import threading

from sqlalchemy import func, select

from app.chat.models import Run
from app.workspace.models import Offer, Output
from tests.factories import QUIZ, ChatDriver, user_id_of
from tests.fake_model import Turn, text, tool_use


def _offer(app, user_id, name="Calm Mornings"):
    with app.extensions["database"].session() as session:
        offer = Offer(user_id=user_id, name=name, description="Coaching", price="$490")
        session.add(offer)
        session.commit()
        return offer.id


def _pause_on_select_offer(app, chat, fake_model):
    offer_id = _offer(app, user_id_of(app))
    fake_model.script(
        Turn(text("Let me look at your offers."), tool_use("list_offers", {})),
        Turn(
            text("Which one?"),
            tool_use("select_offer", {"prompt": "Which offer is the quiz for?"}, id="toolu_pick"),
        ),
    )
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "Make a quiz"))
    return chat_id, offer_id, run


def test_card_pauses_the_run_and_survives_a_new_process(app, chat, fake_model, make_app):
    chat_id, offer_id, run = _pause_on_select_offer(app, chat, fake_model)

    assert run["status"] == "awaiting"
    rows = chat.rows(chat_id)
    assert [r["kind"] for r in rows] == ["user", "host", "card"]
    card = rows[-1]["card"]
    assert card["toolUseId"] == "toolu_pick" and card["tool"] == "select_offer"
    assert card["status"] == "awaiting"
    assert [o["value"] for o in card["steps"][0]["options"]] == [offer_id]
    # The read tool's result is a hidden row: the API never shows it.
    assert all(r["kind"] != "tool_result" for r in rows)

    # Fresh process state: a new app instance on the same database shows the same card.
    second = make_app(anthropic_base_url=fake_model.base_url)
    client = second.test_client()
    client.set_cookie("session", chat.client.get_cookie("session").value)
    again = client.get(f"/api/chats/{chat_id}/messages").get_json()["messages"]
    assert again == rows


def test_answering_the_card_resumes_runs_an_agent_and_answers(app, chat, fake_model):
    chat_id, offer_id, _ = _pause_on_select_offer(app, chat, fake_model)
    fake_model.script(
        Turn(
            text("Writing your quiz."),
            tool_use("quiz", {"instructions": "A morning quiz", "offer_id": offer_id}),
        ),
        Turn(text("```json\n" + json.dumps(QUIZ) + "\n```")),  # the agent's own call, fenced
        Turn(text("Your quiz is ready: Which morning type are you?")),
    )

    response = chat.answer(chat_id, "toolu_pick", {"offer_id": offer_id})
    assert response.status_code == 202
    run = chat.wait(response.get_json()["runId"])

    assert run["status"] == "completed", run
    rows = chat.rows(chat_id)
    assert [r["kind"] for r in rows] == ["user", "host", "card", "host", "agent_output", "host"]
    assert rows[2]["card"]["status"] == "answered"
    assert rows[2]["card"]["answer"] == {"offer_id": offer_id}
    output = rows[4]["agentOutput"]
    assert rows[4]["content"] == "" and output["content"] == QUIZ and output["agent"] == "quiz"
    assert rows[-1]["content"] == "Your quiz is ready: Which morning type are you?"
    with app.extensions["database"].session() as session:
        saved = session.get(Output, output["outputId"])
        assert saved.offer_id == offer_id and saved.conversation_id == chat_id
    # Every request the fake received was valid, and the history was rebuilt each time.
    assert fake_model.rejections == []
    host_calls = [r for r in fake_model.requests if r["tool_choice"]["type"] == "auto"]
    resumed = host_calls[2]["messages"]
    assert resumed[-1]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_pick",
        "content": json.dumps({"offer_id": offer_id}),
    }
    agent_call = fake_model.requests[3]
    assert agent_call["tool_choice"] == {"type": "tool", "name": "submit_quiz"}
    assert "Calm Mornings" in agent_call["messages"][0]["content"]
    # The agent output row carries no blocks: the model sees the output once, in the
    # hidden tool result.
    final_history = host_calls[-1]["messages"]
    assert json.dumps(final_history).count("Five quick questions.") == 1


def test_plain_text_while_a_card_waits_dismisses_it(app, chat, fake_model):
    chat_id, _, _ = _pause_on_select_offer(app, chat, fake_model)
    fake_model.script("No problem, let's talk about something else.")

    run = chat.wait(chat.send(chat_id, "Actually, never mind"))

    assert run["status"] == "completed"
    rows = chat.rows(chat_id)
    assert rows[2]["card"]["status"] == "dismissed"
    sent = fake_model.requests[-1]["messages"][-1]["content"]
    assert sent[0]["type"] == "tool_result" and sent[0]["tool_use_id"] == "toolu_pick"
    assert json.loads(sent[0]["content"]) == {
        "dismissed": True,
        "user_message": "Actually, never mind",
    }
    assert sent[1] == {"type": "text", "text": "Actually, never mind"}
    # The dismissed card no longer accepts an answer.
    assert chat.answer(chat_id, "toolu_pick", {"offer_id": 1}).status_code == 409


def test_wrong_or_answered_tool_use_ids_are_409(app, chat, fake_model):
    chat_id, offer_id, _ = _pause_on_select_offer(app, chat, fake_model)
    wrong = chat.answer(chat_id, "toolu_nope", {"offer_id": offer_id})
    assert wrong.status_code == 409
    assert wrong.get_json()["error"]["code"] == "CARD_NOT_AWAITING"
    fake_model.script("Got it.")
    chat.wait(chat.answer(chat_id, "toolu_pick", {"offer_id": offer_id}).get_json()["runId"])
    again = chat.answer(chat_id, "toolu_pick", {"offer_id": offer_id})
    assert again.status_code == 409


def test_an_answer_naming_someone_elses_offer_is_400(app, chat, fake_model, auth):
    chat_id, _, _ = _pause_on_select_offer(app, chat, fake_model)
    other_offer = _offer(app, auth.create("eve@example.com"), "Eve's offer")
    response = chat.answer(chat_id, "toolu_pick", {"offer_id": other_offer})
    assert response.status_code == 400
    assert "Eve" not in response.get_data(as_text=True)
    assert chat.rows(chat_id)[-1]["card"]["status"] == "awaiting"


def test_two_identical_resumes_race_to_exactly_one_run(app, chat, fake_model):
    chat_id, offer_id, _ = _pause_on_select_offer(app, chat, fake_model)
    fake_model.script(Turn(text("Great choice."), delay_first=0.3))
    cookie = chat.client.get_cookie("session").value
    statuses = []

    def resume():
        client = app.test_client()
        client.set_cookie("session", cookie)
        driver = ChatDriver(app, client, chat.auth)
        statuses.append(driver.answer(chat_id, "toolu_pick", {"offer_id": offer_id}).status_code)

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(statuses) == [202, 409]
    with app.extensions["database"].session() as session:
        runs = session.scalar(
            select(func.count()).select_from(Run).where(Run.conversation_id == chat_id)
        )
    assert runs == 2  # the run that paused, and exactly one resume


def test_a_tool_given_someone_elses_id_gets_not_found(app, chat, fake_model, auth):
    other_offer = _offer(app, auth.create("eve@example.com"), "Eve's secret offer")
    fake_model.script(
        Turn(tool_use("get_offer", {"offer_id": other_offer})), "I could not find it."
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Show offer"))
    result = fake_model.requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "secret" not in result["content"]
    assert result["content"] == f"No offer with id {other_offer} was found."
