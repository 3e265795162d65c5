"""A chat's model, end to end on the fake model server: the request names the chosen model
with its thinking budget and its window's budget, the usage row names the model and its
credits, and a model taken off the list leaves the chat on the default, saying so."""

from __future__ import annotations

from app.chat.model_choice import offered_models
from tests.billing import metered
from tests.fake_model import Turn, text, thinking

OPUS = ["models", "add", "claude-opus-5", "--label", "Opus", "--credits", "7"]


def _cli(app, *args):
    result = app.test_cli_runner().invoke(args=list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_with_no_model_listed_a_run_is_as_before(app, chat, fake_model):
    fake_model.script(Turn(text("Hi.")))
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hello"))
    request = fake_model.requests[-1]
    assert request["model"] == "claude-sonnet-5-5"  # HOST_MODEL
    assert "thinking" not in request
    [event] = metered(app, chat.user_id, 1)
    assert (event.model, event.credits) == ("claude-sonnet-5-5", 2)  # the default weight
    with app.extensions["database"].session() as session:
        [only] = offered_models(session, app.extensions["services"].settings)
    assert (only.name, only.default, only.window) == ("claude-sonnet-5-5", True, 200_000)


def test_a_run_names_the_chats_model_with_its_thinking_and_bills_its_credits(app, chat, fake_model):
    _cli(app, "models", "add", "claude-haiku-5-5", "--label", "Haiku")
    _cli(app, *OPUS, "--window", "100000", "--thinking-budget", "2048")
    chat_id = chat.new_chat()
    picked = chat.client.patch(
        f"/api/chats/{chat_id}", json={"model": "claude-opus-5"}, headers=chat.auth.headers()
    )
    assert picked.status_code == 200
    assert picked.get_json()["model"] == "claude-opus-5"
    fake_model.script(Turn(thinking("Let me see."), text("Hi from Opus.")))
    run = chat.wait(chat.send(chat_id, "Hello"))
    assert run["status"] == "completed"
    request = fake_model.requests[-1]
    assert request["model"] == "claude-opus-5"
    assert request["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert request["max_tokens"] == 8_192 + 2048
    assert not fake_model.rejections
    [event] = metered(app, chat.user_id, 1)
    assert (event.model, event.credits) == ("claude-opus-5", 7)


def test_a_removed_model_falls_back_to_the_default_with_a_notice(app, chat, fake_model):
    _cli(app, "models", "add", "claude-haiku-5-5", "--label", "Haiku")
    _cli(app, *OPUS)
    chat_id = chat.new_chat()
    chat.client.patch(
        f"/api/chats/{chat_id}", json={"model": "claude-opus-5"}, headers=chat.auth.headers()
    )
    _cli(app, "models", "remove", "claude-opus-5")
    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert "claude-opus-5 is no longer offered; answering with Haiku." in page
    fake_model.script(Turn(text("Hi from Haiku.")))
    chat.wait(chat.send(chat_id, "Hello"))
    assert fake_model.requests[-1]["model"] == "claude-haiku-5-5"
    [event] = metered(app, chat.user_id, 1)
    assert (event.model, event.credits) == ("claude-haiku-5-5", 2)
