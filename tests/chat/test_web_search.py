"""The provider's web search server tool, against the fake speaking its documented blocks
(`server_tool_use`, `web_search_tool_result`, text with `citations`): offered when
WEB_SEARCH says so, its results kept verbatim for the next request, its citations shown as
links under the answer, and the chat tainted by what it read (a write is then held)."""

from __future__ import annotations

import pytest

from tests.fake_model import Turn, cited, text, tool_use, web_search

PAGE = ("https://calm.example/mornings", "Calm mornings, a guide")


def _offered(request) -> bool:
    return any(tool.get("type") == "web_search_20250305" for tool in request.get("tools") or [])


@pytest.fixture
def app(make_app, fake_model, request):
    setting = getattr(request, "param", "on")
    return make_app(anthropic_base_url=fake_model.base_url, web_search=setting)


def test_a_search_is_cited_kept_verbatim_and_taints_the_chat(app, chat, client, fake_model):
    fake_model.script(
        Turn(
            web_search("calm morning routines", PAGE),
            cited("Start with light, then water.", (*PAGE, "light first")),
        ),
        Turn(tool_use("save_character", {"name": "Mallory", "description": "From the web"})),
    )
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "What makes a calm morning?"))

    assert run["status"] == "completed", run
    assert _offered(fake_model.requests[0])
    answer = chat.rows(chat_id)[-1]
    assert answer["content"] == "Start with light, then water."
    assert answer["citations"] == [{"url": PAGE[0], "title": PAGE[1]}]
    assert answer["untrusted_sources"][0]["web_search"] == "calm morning routines"
    page = client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert f'id="m-{answer["sequence"]}-sources"' in page
    assert f'href="{PAGE[0]}" rel="noopener noreferrer nofollow"' in page

    # The next request sends the results back as they came (the fake refuses them
    # otherwise), and a write the model then tries waits for the person.
    run = chat.wait(chat.send(chat_id, "Save a character for this"))
    assert fake_model.requests[1].error is None, fake_model.requests[1].error
    assert run["status"] == "awaiting", run
    assert chat.rows(chat_id)[-1]["card"]["tool"] == "save_character"


@pytest.mark.parametrize(
    ("app", "offered"), [("off", False), ("auto", False), ("on", True)], indirect=["app"]
)
def test_web_search_is_offered_as_the_setting_says(app, chat, fake_model, offered):
    """`auto` is off on another model server (ANTHROPIC_BASE_URL: the fake here)."""
    assert app.extensions["services"].settings.offers_web_search is offered
    fake_model.script(Turn(text("Hello.")))
    chat.wait(chat.send(chat.new_chat(), "Hi"))
    assert _offered(fake_model.requests[-1]) is offered


def test_auto_offers_it_on_the_anthropic_api_only(make_app):
    on_api = make_app(anthropic_base_url=None, anthropic_api_key="sk-test", web_search="auto")
    assert on_api.extensions["services"].settings.offers_web_search is True
