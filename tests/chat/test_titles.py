"""Chat titles: the fast model names a chat after its first exchange (a forced
`submit_title` call), unless the person named it; every change reaches the person's tabs."""

from __future__ import annotations

import threading

import pytest

from app.chat.models import Conversation
from app.chat.titles import tidy_title
from tests.fake_model import Turn, api_error, text, tool_use
from tests.waiting import eventually, scaled


@pytest.fixture
def app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, chat_titles=True)


def _conversation(app, chat_id) -> Conversation:
    with app.extensions["database"].session() as session:
        return session.get(Conversation, chat_id)


def _title_requests(fake_model) -> list[dict]:
    return [r for r in fake_model.requests if r.get("tool_choice", {}).get("type") == "tool"]


def _wait_for_title(app, chat_id, title, timeout=10.0) -> Conversation:
    return eventually(
        lambda: (conversation := _conversation(app, chat_id)).title == title and conversation,
        timeout,
        lambda: f"title is still {_conversation(app, chat_id).title!r}",
    )


def _model_was_asked(fake_model, n):
    """The model's requests once the run has ended: `chat.wait` awaits the run's future,
    and the title is proposed inside the run, after its answer (app/chat/loop.py), so
    nothing more can come."""
    assert len(fake_model.requests) == n, [r["messages"][-1] for r in fake_model.requests]


def test_the_fast_model_names_the_chat_after_the_first_exchange(app, chat, fake_model):
    fake_model.script(
        Turn(text("Here are three spring launch ideas for your bakery.")),
        Turn(tool_use("submit_title", {"title": "Spring launch ideas"})),
    )
    chat_id = chat.new_chat()
    user_id = _conversation(app, chat_id).user_id
    subscription = app.extensions["services"].hub.subscribe(999_999, user_id)
    try:
        chat.wait(chat.send(chat_id, "Give me launch ideas for my bakery this spring"))
        conversation = _wait_for_title(app, chat_id, "Spring launch ideas")
        events = []
        while (event := subscription.get(timeout=0.5)) is not None:
            events.append(event)
    finally:
        subscription.close()

    assert conversation.title_source == "model"
    request = _title_requests(fake_model)[0]
    assert request["tool_choice"] == {"type": "tool", "name": "submit_title"}
    [tool] = request["tools"]
    assert tool["name"] == "submit_title"
    assert tool["input_schema"]["properties"]["title"]["maxLength"] == 60
    assert tool["input_schema"]["required"] == ["title"]
    assert "thinking" not in request
    assert request["model"] == app.extensions["services"].settings.fast_model
    said = request["messages"][0]["content"]
    assert "Give me launch ideas for my bakery this spring" in said
    assert "three spring launch ideas" in said
    assert "language" in request["system"]
    # The person's other tabs hear of it (the conversation list, header and tab title).
    titles = [e.conversation["title"] for e in events if e.kind == "conversation"]
    assert titles[-1] == "Spring launch ideas"
    assert fake_model.rejections == []

    # Named once: later exchanges leave it alone.
    fake_model.script(Turn(text("More ideas.")))
    chat.wait(chat.send(chat_id, "More please"))
    _model_was_asked(fake_model, 3)
    assert len(fake_model.requests) == 3
    assert _conversation(app, chat_id).title == "Spring launch ideas"


def test_a_chat_the_person_renamed_keeps_its_name(app, chat, fake_model):
    fake_model.script(Turn(text("Sure.")))
    chat_id = chat.new_chat()
    response = chat.client.post(
        f"/chats/{chat_id}/rename",
        data={"title": "My own name"},
        headers={**chat.auth.headers(), "HX-Request": "true"},
    )
    assert response.status_code == 200
    chat.wait(chat.send(chat_id, "Write ad copy for my offer"))
    _model_was_asked(fake_model, 1)

    assert _title_requests(fake_model) == []
    conversation = _conversation(app, chat_id)
    assert (conversation.title, conversation.title_source) == ("My own name", "person")


def test_a_title_given_by_a_script_is_kept(app, chat, fake_model):
    fake_model.script(Turn(text("Sure.")))
    chat_id = chat.new_chat(title="Launch ideas")
    chat.wait(chat.send(chat_id, "Write ad copy for my offer"))
    _model_was_asked(fake_model, 1)
    assert _title_requests(fake_model) == []
    assert _conversation(app, chat_id).title == "Launch ideas"


def test_a_rename_while_the_model_thinks_of_a_title_wins(app, chat, fake_model):
    asked, answer = threading.Event(), threading.Event()

    def title_once_renamed(body):
        asked.set()  # the title's request reached the model; it answers after the rename
        answer.wait(scaled(10))
        return Turn(tool_use("submit_title", {"title": "Proposed title"}))

    fake_model.script(Turn(text("Sure.")))
    fake_model.responder = title_once_renamed
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Write ad copy for my offer")
    assert asked.wait(scaled(10)), "the title was never asked for"
    try:
        renamed = chat.client.post(
            f"/chats/{chat_id}/rename",
            data={"title": "Renamed meanwhile"},
            headers={**chat.auth.headers(), "HX-Request": "true"},
        )
        assert renamed.status_code == 200
    finally:
        answer.set()
    chat.wait(run_id)  # the run's future: its title step has ended too
    assert len(_title_requests(fake_model)) == 1
    conversation = _conversation(app, chat_id)
    assert (conversation.title, conversation.title_source) == ("Renamed meanwhile", "person")


def test_a_failed_proposal_keeps_the_first_words_and_the_run_is_fine(app, chat, fake_model):
    fake_model.script(
        Turn(text("Sure.")),
        api_error(400, "invalid_request_error", "no such model"),
    )
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "Write a quiz for my coffee subscription"))
    _model_was_asked(fake_model, 2)
    assert run["status"] == "completed"
    conversation = _conversation(app, chat_id)
    assert conversation.title == "Write a quiz for my coffee subscription"
    assert conversation.title_source == "message"
    assert [r["kind"] for r in chat.rows(chat_id)] == ["user", "host"]


def test_the_strict_model_names_a_chat_from_the_schema_alone(app, chat, fake_model):
    fake_model.script(Turn(text("Sure.")))
    fake_model.strict = True
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Write a quiz"))
    conversation = eventually(
        lambda: (
            (conversation := _conversation(app, chat_id)).title_source == "model" and conversation
        ),
        10,
        lambda: f"the title is still from {_conversation(app, chat_id).title_source!r}",
    )
    assert conversation.title_source == "model"
    assert 0 < len(conversation.title) <= 60
    assert fake_model.strict_answers == ["submit_title"]


@pytest.mark.parametrize(
    ("proposed", "kept"),
    [
        ('"Spring launch ideas."', "Spring launch ideas"),
        ("  Title:  Ad   copy\nfor coaching ", "Ad copy for coaching"),
        ("x" * 80, "x" * 59 + "…"),
    ],
)
def test_tidy_title(proposed, kept):
    assert tidy_title(proposed) == kept
