"""The demo model, always through the real SDK with DemoTransport plugged in."""

from __future__ import annotations

import json
import time

import anthropic
import httpx2 as httpx
import pytest
from jsonschema import Draft202012Validator

from app.agents.catalog import load_agents
from app.agents.outputs import answer_tool_name
from app.agents.runner import agent_system_prompt
from app.config import load_settings
from app.llm.client import ModelClient, StreamCallbacks
from app.llm.demo import DEFAULT_DELAY, DemoTransport

# Not the default host model: the SDK warns that claude-sonnet-4-5 is deprecated.
MODEL = "claude-haiku-4-5"
HOST_SYSTEM = "You are Loopdesk, the creative-marketing assistant inside a person's workspace."


def _tool(name: str, properties: dict | None = None) -> dict:
    return {
        "name": name,
        "description": f"The {name} tool.",
        "input_schema": {"type": "object", "properties": properties or {}},
    }


TOOLS = [
    _tool("list_offers"),
    _tool("select_offer", {"prompt": {"type": "string"}}),
    _tool("ad_copy", {"instructions": {"type": "string"}, "offer_id": {"type": "integer"}}),
    _tool("quiz", {"instructions": {"type": "string"}, "offer_id": {"type": "integer"}}),
]

OFFERS_RESULT = {
    "offers": [
        {"id": 7, "name": "Calm Mornings Coaching", "description": "Six weeks of coaching."},
        {"id": 8, "name": "Trailhead Coffee Subscription", "description": "Beans."},
    ]
}

AD_COPY_RESULT = {
    "output_id": 12,
    "agent": "ad-copy",
    "title": "Calm Mornings Coaching: three ad angles",
    "output": {"title": "Calm Mornings Coaching: three ad angles", "variants": [{}, {}, {}]},
}


@pytest.fixture
def sdk():
    http_client = httpx.Client(transport=DemoTransport(delay=0))
    client = anthropic.Anthropic(
        api_key="demo", base_url="http://demo.invalid", http_client=http_client, max_retries=0
    )
    yield client
    client.close()


@pytest.fixture
def model(sdk, tmp_path):
    settings = load_settings(env={}, overrides={"instance_path": tmp_path, "secret_key": "x"})
    return ModelClient(settings, sdk)


def _request(messages: list[dict], *, tools: list[dict] | None = TOOLS, **extra) -> dict:
    request = {"model": MODEL, "max_tokens": 1024, "system": HOST_SYSTEM, "messages": messages}
    if tools is not None:
        request["tools"] = tools
    return {**request, **extra}


def _stream(sdk, request: dict) -> list:
    with sdk.messages.create(stream=True, **request) as stream:
        return list(stream)


def _assemble(events: list) -> tuple[list[dict], str | None]:
    """Content blocks and stop reason from raw stream events (like the SDK helper)."""
    blocks: list[dict] = []
    partial: dict[int, str] = {}
    stop_reason = None
    for event in events:
        if event.type == "content_block_start":
            blocks.append(event.content_block.model_dump(exclude_none=True))
            assert event.index == len(blocks) - 1
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta":
                blocks[event.index]["text"] += event.delta.text
            else:
                partial[event.index] = partial.get(event.index, "") + event.delta.partial_json
        elif event.type == "content_block_stop" and event.index in partial:
            blocks[event.index]["input"] = json.loads(partial.pop(event.index))
        elif event.type == "message_delta":
            stop_reason = event.delta.stop_reason
    return blocks, stop_reason


def _reply(sdk, messages: list[dict], **options) -> tuple[list[dict], str | None]:
    return _assemble(_stream(sdk, _request(messages, **options)))


def _text(blocks: list[dict]) -> str:
    return "".join(b["text"] for b in blocks if b["type"] == "text")


def _tool_uses(blocks: list[dict]) -> list[dict]:
    return [b for b in blocks if b["type"] == "tool_use"]


def _tool_turn(name: str, arguments: dict, result, *, is_error=False, call_id=None) -> list[dict]:
    """An assistant turn calling `name` and the user turn carrying its result."""
    call_id = call_id or f"toolu_demo_{name}"
    content = result if isinstance(result, str) else json.dumps(result)
    tool_result = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    if is_error:
        tool_result["is_error"] = True
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Working on it."},
                {"type": "tool_use", "id": call_id, "name": name, "input": arguments},
            ],
        },
        {"role": "user", "content": [tool_result]},
    ]


USER = {"role": "user", "content": "Write some ads for me"}
AFTER_LIST = [USER, *_tool_turn("list_offers", {}, OFFERS_RESULT)]
AFTER_SELECT = [
    *AFTER_LIST,
    *_tool_turn("select_offer", {"prompt": "Which offer?"}, {"offer_id": 7}),
]
AFTER_AD_COPY = [
    *AFTER_SELECT,
    *_tool_turn("ad_copy", {"instructions": "Write", "offer_id": 7}, AD_COPY_RESULT),
]


# -- the wire format -------------------------------------------------------------------


def test_stream_has_the_api_event_sequence(sdk):
    events = _stream(sdk, _request([USER]))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    start = events[0].message
    assert start.role == "assistant" and start.model == MODEL and start.content == []
    assert start.usage.input_tokens > 0
    final = events[-2]
    assert final.delta.stop_reason == "tool_use"
    assert final.usage.output_tokens > 1
    text_deltas = [
        e for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta"
    ]
    json_deltas = [
        e for e in events if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    assert len(text_deltas) >= 3
    assert len(json_deltas) >= 1


def test_raw_sse_lines_have_event_and_data(sdk):
    with httpx.Client(transport=DemoTransport(delay=0)) as client:
        response = client.post(
            "http://demo.invalid/v1/messages", json={**_request([USER]), "stream": True}
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in response.text.split("\n\n") if f]
    for frame in frames:
        event_line, data_line = frame.split("\n")
        kind = event_line.removeprefix("event: ")
        assert json.loads(data_line.removeprefix("data: "))["type"] == kind


def test_delay_spaces_the_deltas():
    assert DemoTransport().delay == DEFAULT_DELAY == 0.015
    with (
        httpx.Client(transport=DemoTransport(delay=0.005)) as http_client,
        anthropic.Anthropic(
            api_key="demo", base_url="http://demo.invalid", http_client=http_client
        ) as sdk,
    ):
        started = time.monotonic()
        events = _stream(sdk, _request([USER]))
        elapsed = time.monotonic() - started
    deltas = [e for e in events if e.type == "content_block_delta"]
    assert elapsed >= 0.005 * len(deltas) * 0.8


def test_closing_a_stream_early_is_fine(sdk):
    stream = sdk.messages.create(stream=True, **_request([USER]))
    first = next(iter(stream))
    stream.close()
    assert first.type == "message_start"


def test_non_streaming_answer_is_a_full_message(sdk):
    message = sdk.messages.create(**_request([USER]))
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[1].name == "list_offers"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


def test_count_tokens(sdk):
    request = _request([USER])
    request.pop("max_tokens")
    counted = sdk.messages.count_tokens(**request)
    assert counted.input_tokens >= len(HOST_SYSTEM) // 4


def test_unknown_path_is_a_404():
    with httpx.Client(transport=DemoTransport(delay=0)) as client:
        response = client.post("http://demo.invalid/v1/other", json={})
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


def test_bad_request_is_an_api_error(sdk):
    with pytest.raises(anthropic.BadRequestError):
        sdk.messages.create(model=MODEL, max_tokens=10, messages=[])


# -- the scripted flow -----------------------------------------------------------------


def test_step1_new_message_lists_offers(sdk):
    blocks, stop = _reply(sdk, [USER])
    assert stop == "tool_use"
    assert "demo model" in _text(blocks)
    (call,) = _tool_uses(blocks)
    assert call["name"] == "list_offers" and call["input"] == {}
    assert call["id"].startswith("toolu_demo_")


def test_step1_with_text_blocks_and_no_list_offers_tool(sdk):
    message = {"role": "user", "content": [{"type": "text", "text": "Hello"}]}
    blocks, stop = _reply(sdk, [message], tools=[_tool("ask_user")])
    assert stop == "end_turn"
    assert not _tool_uses(blocks)
    assert "demo model" in _text(blocks)


def test_step2_offers_listed_asks_which_offer(sdk):
    blocks, stop = _reply(sdk, AFTER_LIST)
    assert stop == "tool_use"
    (call,) = _tool_uses(blocks)
    assert call["name"] == "select_offer"
    assert call["input"] == {"prompt": "Which offer should we write ad copy for?"}
    assert "which offer" not in _text(blocks).lower()  # the card asks it, once


def test_step2_with_one_offer_writes_for_it_without_asking(sdk):
    one = {"offers": OFFERS_RESULT["offers"][:1]}
    blocks, stop = _reply(sdk, [USER, *_tool_turn("list_offers", {}, one)])
    assert stop == "tool_use"
    (call,) = _tool_uses(blocks)
    assert call["name"] == "ad_copy" and call["input"]["offer_id"] == 7
    assert "Calm Mornings Coaching" in _text(blocks)


def test_the_demo_model_introduces_itself_once_per_chat(sdk):
    told = [{**turn} for turn in AFTER_AD_COPY]
    told[1] = {
        **told[1],
        "content": [{"type": "text", "text": "I'm the demo model."}] + told[1]["content"][1:],
    }
    text = _text(_reply(sdk, told)[0])
    assert "Your ad copy is saved" in text and "demo model" not in text
    again = _text(_reply(sdk, [*told, {"role": "assistant", "content": "Done."}, USER])[0])
    assert "demo model" not in again


def test_step2_offers_as_text_blocks(sdk):
    messages = [USER, *_tool_turn("list_offers", {}, "x")]
    messages[-1]["content"][0]["content"] = [{"type": "text", "text": json.dumps(OFFERS_RESULT)}]
    blocks, _ = _reply(sdk, messages)
    assert _tool_uses(blocks)[0]["name"] == "select_offer"


@pytest.mark.parametrize("empty", [{"offers": []}, [], "No offers yet."])
def test_step2_without_offers_points_to_the_offers_page(sdk, empty):
    blocks, stop = _reply(sdk, [USER, *_tool_turn("list_offers", {}, empty)])
    assert stop == "end_turn"
    assert not _tool_uses(blocks)
    assert "/workspace/offers" in _text(blocks)


def test_step3_selected_offer_calls_ad_copy(sdk):
    blocks, stop = _reply(sdk, AFTER_SELECT)
    assert stop == "tool_use"
    assert "Great choice" in _text(blocks)
    (call,) = _tool_uses(blocks)
    assert call["name"] == "ad_copy"
    assert call["input"]["offer_id"] == 7
    assert call["input"]["instructions"].startswith("Write three ad variants")


def test_step4_ad_copy_result_is_presented(sdk):
    blocks, stop = _reply(sdk, AFTER_AD_COPY)
    assert stop == "end_turn"
    assert not _tool_uses(blocks)
    text = _text(blocks)
    assert "Your ad copy is saved" in text
    assert AD_COPY_RESULT["title"] in text
    assert "demo model" in text
    assert "ANTHROPIC_API_KEY" in text and "ANTHROPIC_BASE_URL" in text


def test_dismissed_card_gets_an_apology(sdk):
    dismissed = {"dismissed": True, "user_message": "Actually, never mind"}
    messages = [*AFTER_LIST, *_tool_turn("select_offer", {"prompt": "?"}, dismissed)]
    blocks, stop = _reply(sdk, messages)
    assert stop == "end_turn"
    assert not _tool_uses(blocks)
    assert "Sorry" in _text(blocks) and "demo model" in _text(blocks)


def test_tool_error_gets_an_apology(sdk):
    messages = [
        *AFTER_SELECT,
        *_tool_turn(
            "ad_copy", {"instructions": "Write", "offer_id": 7}, "The agent failed.", is_error=True
        ),
    ]
    blocks, stop = _reply(sdk, messages)
    assert stop == "end_turn"
    assert not _tool_uses(blocks)
    assert "Sorry" in _text(blocks)


def test_tool_choice_none_wraps_up_in_one_sentence(sdk):
    blocks, stop = _reply(sdk, AFTER_SELECT, tool_choice={"type": "none"})
    assert stop == "end_turn"
    assert [b["type"] for b in blocks] == ["text"]
    text = _text(blocks)
    assert text.count(".") == 1 and text.endswith(".")
    assert "demo model" in text


def test_other_calls_get_a_short_text(model):
    turn = model.complete(
        {
            "model": MODEL,
            "max_tokens": 300,
            "system": "Summarize this conversation in two sentences.",
            "messages": [{"role": "user", "content": "Write some ads for me"}],
        }
    )
    assert turn.stop_reason == "end_turn"
    assert turn.tool_uses == []
    assert "demo model" in turn.text
    assert 0 < len(turn.text) < 400
    assert turn.usage["input_tokens"] > 0


# -- through ModelClient -----------------------------------------------------------------


def test_model_client_stream_turn_parses_tool_input(model):
    texts: list[str] = []
    turn = model.stream_turn(_request(AFTER_SELECT), StreamCallbacks(on_text=texts.append))
    assert turn.stop_reason == "tool_use"
    assert len(texts) >= 2
    assert turn.text == "".join(texts)
    (call,) = turn.tool_uses
    assert call["name"] == "ad_copy"
    assert call["input"]["offer_id"] == 7
    assert turn.usage["input_tokens"] > 0 and turn.usage["output_tokens"] > 0


def test_whole_flow_through_model_client(model):
    """The real loop's shape: each tool call answered with the result the tool would give."""
    results = {
        "list_offers": OFFERS_RESULT,
        "select_offer": {"offer_id": 8},
        "ad_copy": {**AD_COPY_RESULT, "output_id": 13},
    }
    messages: list[dict] = [USER]
    called = []
    for _ in range(6):
        turn = model.stream_turn(_request(messages))
        messages.append({"role": "assistant", "content": turn.content})
        if turn.stop_reason != "tool_use":
            break
        (call,) = turn.tool_uses
        called.append((call["name"], call["input"]))
        result = {
            "type": "tool_result",
            "tool_use_id": call["id"],
            "content": json.dumps(results[call["name"]]),
        }
        messages.append({"role": "user", "content": [result]})
    assert [name for name, _ in called] == ["list_offers", "select_offer", "ad_copy"]
    assert called[2][1]["offer_id"] == 8
    assert "Your ad copy is saved" in turn.text


# -- agent calls -------------------------------------------------------------------------


def _agent_message(offer: dict) -> str:
    return "\n\n".join(
        [
            "## Instructions from the host\nWrite it for busy founders.",
            "## Offer\n" + json.dumps(offer, ensure_ascii=False),
            "## Persona\n" + json.dumps({"name": "Overloaded Olivia", "description": "Busy"}),
            "Answer with the JSON object only.",
        ]
    )


AGENTS = load_agents()


def _forced(agent) -> dict:
    """What a structured agent call adds: its output schema as the one forced tool."""
    name = answer_tool_name(agent.name)
    return {
        "tools": [
            {"name": name, "description": "The answer.", "input_schema": agent.output_schema}
        ],
        "tool_choice": {"type": "tool", "name": name},
    }


def _answer(turn) -> dict:
    assert turn.stop_reason == "tool_use" and len(turn.tool_uses) == 1
    return turn.tool_uses[0]["input"]


@pytest.mark.parametrize("slug", sorted(AGENTS.agents))
def test_agent_call_streams_schema_valid_json(model, slug):
    agent = AGENTS.agents[slug]
    offer = {
        "id": 7,
        "name": "Calm Mornings Coaching",
        "description": "A six-week coaching programme for busy founders.",
        "audience": "Founders of small companies",
        "price": "$490",
        "brand_colors": [],
    }
    texts: list[str] = []
    turn = model.stream_turn(
        {
            "model": MODEL,
            "max_tokens": agent.max_tokens,
            "system": agent_system_prompt(agent),
            "messages": [{"role": "user", "content": _agent_message(offer)}],
            **_forced(agent),
        },
        StreamCallbacks(on_input_json=texts.append),
    )
    output = _answer(turn)
    assert len(texts) > 5, "the answer streams in pieces (the timeline shows it being written)"
    errors = list(Draft202012Validator(agent.output_schema).iter_errors(output))
    assert errors == []
    assert "Calm Mornings Coaching" in output["title"]
    assert "\u2014" not in "".join(texts)  # the shared guidelines forbid em dashes


@pytest.mark.parametrize("slug", sorted(AGENTS.agents))
def test_an_agent_is_known_by_its_declared_name_whatever_its_prompt_says(model, slug):
    """Editing an agent's prompt cannot break the demo: only the forced tool its declared
    name gives it says which agent is asking."""
    agent = AGENTS.agents[slug]
    turn = model.stream_turn(
        {
            "model": MODEL,
            "max_tokens": agent.max_tokens,
            "system": "A prompt that names no agent at all.",
            "messages": [{"role": "user", "content": _agent_message({"name": "Calm Mornings"})}],
            **_forced(agent),
        },
        StreamCallbacks(),
    )
    assert list(Draft202012Validator(agent.output_schema).iter_errors(_answer(turn))) == []


def test_agent_output_with_a_long_offer_name_stays_valid(model):
    agent = AGENTS.agents["ad-copy"]
    offer = {"id": 1, "name": "An Extremely Long Offer Name " * 4}
    turn = model.stream_turn(
        {
            "model": MODEL,
            "max_tokens": 100,
            "system": [{"type": "text", "text": agent_system_prompt(agent)}],
            "messages": [{"role": "user", "content": _agent_message(offer)}],
            **_forced(agent),
        }
    )
    assert list(Draft202012Validator(agent.output_schema).iter_errors(_answer(turn))) == []


def test_agent_retry_turn_still_answers_json(model):
    agent = AGENTS.agents["quiz"]
    messages = [
        {"role": "user", "content": _agent_message({"id": 2, "name": "Ledgerly Bookkeeping"})},
        {"role": "assistant", "content": "not json"},
        {"role": "user", "content": "The answer was not valid JSON. Answer again."},
    ]
    turn = model.stream_turn(
        {
            "model": MODEL,
            "max_tokens": 100,
            "system": agent_system_prompt(agent),
            "messages": messages,
            **_forced(agent),
        }
    )
    output = _answer(turn)
    assert "Ledgerly Bookkeeping" in output["title"]
    assert list(Draft202012Validator(agent.output_schema).iter_errors(output)) == []


def test_a_forced_tool_the_demo_does_not_know_gets_a_plain_sentence(model):
    """The demo recognises agents by the forced tool's name alone (never by words in a
    prompt file): anything else is answered as a model that cannot do it would."""
    schema = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    turn = model.stream_turn(
        {
            "model": MODEL,
            "max_tokens": 100,
            "system": "Some other structured call. Answer in JSON.",
            "messages": [{"role": "user", "content": "Go"}],
            "tools": [{"name": "submit_unknown", "input_schema": schema}],
            "tool_choice": {"type": "tool", "name": "submit_unknown"},
        }
    )
    assert turn.tool_uses == [] and turn.text.strip()


def test_a_chat_title_is_the_first_words_of_the_persons_message(model):
    from app.chat.titles import SYSTEM, TITLE
    from app.llm.structured import structured_call

    said = (
        "## The person's first message\nWrite three short ads for my coaching offer, please.\n\n"
        "## The assistant's first answer\nHere they are."
    )
    data = structured_call(
        model,
        model_name=MODEL,
        system=SYSTEM,
        messages=[{"role": "user", "content": said}],
        shape=TITLE,
        max_tokens=100,
    )
    assert data == {"title": "Write three short ads for my"}


def test_demo_ad_copy_is_written_from_the_offer_s_own_text(model):
    """Each hook opens with words the offer or persona wrote, and every price in the ads
    is the offer's: the demo invents nothing, as prompts/agents/ad-copy.md asks."""
    agent = AGENTS.agents["ad-copy"]
    offer = {
        "id": 3,
        "name": "Tidy Garden Club",
        "description": "Monthly visits that keep a small garden weeded and planted all year.",
        "audience": "Renters with a yard and no time on weekends.",
        "price": "€35 a visit",
    }
    turn = model.stream_turn(
        {
            "model": MODEL,
            "max_tokens": 100,
            "system": [{"type": "text", "text": agent_system_prompt(agent)}],
            "messages": [{"role": "user", "content": _agent_message(offer)}],
            **_forced(agent),
        }
    )
    hooks = [variant["hook"] for variant in _answer(turn)["variants"]]
    assert hooks[0].startswith("Renters with a yard")
    assert hooks[1].startswith("Monthly visits that keep a small garden")
    assert "€35 a visit" in hooks[2]
    texts = json.dumps(_answer(turn), ensure_ascii=False)
    assert "Your week fills up" not in texts and texts.count("€") == texts.count("€35 a visit")
