"""The fake Messages API server, exercised only through the real ``anthropic`` SDK."""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest
from jsonschema import Draft202012Validator

from tests.fake_model import (
    NO_REPLY_TEXT,
    FakeModelServer,
    Turn,
    api_error,
    count_request_tokens,
    redacted_thinking,
    schema_instance,
    stream_error,
    text,
    thinking,
    tool_use,
)

MODEL = "claude-sonnet-4-6"  # not in the SDK's deprecated / thinking-warning lists
HI = [{"role": "user", "content": "Hi"}]
TOOLS = [
    {
        "name": "get_offer",
        "description": "Fetch one offer.",
        "input_schema": {"type": "object", "properties": {"offer_id": {"type": "integer"}}},
    },
    {"name": "list_offers", "input_schema": {"type": "object", "properties": {}}},
]
THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture
def client(fake_model: FakeModelServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        api_key="test", base_url=fake_model.base_url, max_retries=0, timeout=10
    ) as c:
        yield c


def make_client(server: FakeModelServer, **kwargs: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="test", base_url=server.base_url, timeout=10, **{"max_retries": 0, **kwargs}
    )


def create(client: anthropic.Anthropic, **kwargs: Any) -> anthropic.types.Message:
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 2048, "messages": HI, **kwargs}
    return client.messages.create(**params)


def raw_sse_lines(client: anthropic.Anthropic, **kwargs: Any) -> list[str]:
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 2048, "messages": HI, **kwargs}
    with client.messages.with_streaming_response.create(stream=True, **params) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(response.iter_lines())


def sse_events(lines: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Pair each ``event:`` line with the ``data:`` line that must follow it."""
    events = []
    for n, line in enumerate(lines):
        if line.startswith("event: "):
            assert lines[n + 1].startswith("data: "), lines[n : n + 2]
            data = json.loads(lines[n + 1][len("data: ") :])
            assert data["type"] == line[len("event: ") :]
            events.append((data["type"], data))
    return events


# --------------------------------------------------------------------------------------
# streaming and non-streaming replies
# --------------------------------------------------------------------------------------


def test_stream_helper_final_message(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(Turn(text("Hello there, nice to meet you.")))
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=HI) as stream:
        pieces = list(stream.text_stream)
        message = stream.get_final_message()

    assert len(pieces) > 1
    assert "".join(pieces) == "Hello there, nice to meet you."
    assert message.content[0].type == "text"
    assert message.content[0].text == "Hello there, nice to meet you."
    assert message.stop_reason == "end_turn"
    assert message.role == "assistant"
    assert message.model == MODEL
    assert message.id.startswith("msg_")
    assert message.usage.input_tokens == count_request_tokens(fake_model.requests[0])
    assert message.usage.output_tokens > 0


def test_raw_create_stream_iteration(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(Turn(text("One two three four")))
    events = list(create(client, stream=True))

    types = [e.type for e in events]
    assert types[0] == "message_start"
    assert types[1] == "content_block_start"
    assert types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert len(deltas) >= 2 and "".join(deltas) == "One two three four"
    start = events[0].message
    assert start.content == [] and start.stop_reason is None
    assert start.usage.input_tokens == count_request_tokens(fake_model.requests[0])
    assert events[-2].delta.stop_reason == "end_turn"
    assert events[-2].delta.stop_sequence is None


def test_wire_format_has_event_and_data_lines_and_pings(
    fake_model: FakeModelServer, client: anthropic.Anthropic
):
    fake_model.script(Turn(text("Hi there friend")))
    lines = raw_sse_lines(client)
    events = sse_events(lines)
    kinds = [k for k, _ in events]
    assert kinds[:3] == ["message_start", "ping", "content_block_start"]
    assert kinds[-2:] == ["message_delta", "message_stop"]
    # Each event is `event:` + `data:` + a blank line.
    assert lines.count("") == len(events)
    start = events[0][1]["message"]
    assert set(start) >= {"id", "type", "role", "model", "content", "stop_reason", "usage"}
    assert set(start["usage"]) >= {"input_tokens", "output_tokens"}
    message_delta = events[-2][1]
    assert message_delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert isinstance(message_delta["usage"]["output_tokens"], int)


def test_non_streaming_create(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(Turn(text("Plain answer"), stop_reason="max_tokens"))
    message = create(client)
    assert message.content[0].text == "Plain answer"
    assert message.stop_reason == "max_tokens"
    assert message.usage.input_tokens == count_request_tokens(fake_model.requests[0])
    assert fake_model.replies[0]["content"] == [{"type": "text", "text": "Plain answer"}]


def test_tool_use_turn(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(
        Turn(text("Let me look."), tool_use("get_offer", {"offer_id": 3, "note": 'a "b" é'})),
        Turn(text("Offer 3 is great.")),
    )
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=HI, tools=TOOLS) as s:
        json_deltas = [
            e.delta.partial_json
            for e in s
            if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
        ]
        message = s.get_final_message()

    assert len(json_deltas) >= 2
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["text", "tool_use"]
    call = message.content[1]
    assert call.name == "get_offer"
    assert call.input == {"offer_id": 3, "note": 'a "b" é'}
    assert call.id.startswith("toolu_")

    history = [
        *HI,
        {"role": "assistant", "content": message.content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": "{}"},
                {"type": "text", "text": "thanks"},
            ],
        },
    ]
    follow_up = create(client, messages=history, tools=TOOLS)
    assert follow_up.content[0].text == "Offer 3 is great."
    assert fake_model.rejections == []


def test_tool_use_ids_are_fresh_per_reply_unless_given(
    fake_model: FakeModelServer, client: anthropic.Anthropic
):
    turn = Turn(tool_use("list_offers"))
    fake_model.script(turn, turn, Turn(tool_use("list_offers", id="toolu_fixed")))
    ids = [create(client, tools=TOOLS).content[0].id for _ in range(3)]
    assert ids[0] != ids[1]
    assert ids[2] == "toolu_fixed"


def test_thinking_signature_round_trip(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(
        Turn(
            thinking("pondering the offers"), tool_use("get_offer", {"offer_id": 3}, id="toolu_x")
        ),
        Turn(text("Done.")),
    )
    with client.messages.stream(
        model=MODEL, max_tokens=2048, messages=HI, tools=TOOLS, thinking=THINKING
    ) as stream:
        delta_types = [e.delta.type for e in stream if e.type == "content_block_delta"]
        message = stream.get_final_message()

    assert "thinking_delta" in delta_types and "signature_delta" in delta_types
    block = message.content[0]
    assert block.type == "thinking"
    assert block.thinking == "pondering the offers"
    assert block.signature in fake_model.issued_signatures

    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x"}]}
    params = {"tools": TOOLS, "thinking": THINKING}
    good = [*HI, {"role": "assistant", "content": message.content}, result]
    assert create(client, messages=good, **params).content[0].text == "Done."

    without = [*HI, {"role": "assistant", "content": message.content[1:]}, result]
    with pytest.raises(anthropic.BadRequestError) as excinfo:
        create(client, messages=without, **params)
    assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in str(excinfo.value)

    forged = {"type": "thinking", "thinking": "pondering the offers", "signature": "forged"}
    bad_sig = [*HI, {"role": "assistant", "content": [forged, *message.content[1:]]}, result]
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
        create(client, messages=bad_sig, **params)

    # Without thinking enabled the leading thinking block is not required.
    fake_model.script(Turn(text("ok")))
    assert create(client, messages=without, tools=TOOLS).content[0].text == "ok"


def test_redacted_thinking_round_trip(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(Turn(redacted_thinking(), tool_use("list_offers", id="toolu_r")), "Fine.")
    message = create(client, tools=TOOLS, thinking=THINKING)
    assert message.content[0].type == "redacted_thinking"
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_r"}]}
    history = [*HI, {"role": "assistant", "content": message.content}, result]
    assert create(client, messages=history, tools=TOOLS, thinking=THINKING).content[0].text == (
        "Fine."
    )


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------

TOOL_CALL = {"type": "tool_use", "id": "toolu_1", "name": "get_offer", "input": {"offer_id": 1}}
TOOL_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def say(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


REJECTED = {
    "max_tokens_zero": (
        {"max_tokens": 0},
        "max_tokens: Input should be greater than or equal to 1",
    ),
    "no_messages": ({"messages": []}, "messages: at least one message is required"),
    "first_assistant": (
        {"messages": [{"role": "assistant", "content": "Hi"}, *HI]},
        'first message must use the "user" role',
    ),
    "bad_role": ({"messages": [{"role": "system", "content": "x"}]}, "Input should be 'user'"),
    "empty_text_block": ({"messages": [user(say(""))]}, "text content blocks must be non-empty"),
    "blank_text_block": ({"messages": [user(say(" \n"))]}, "text content blocks must be non-empty"),
    "empty_string_content": (
        {"messages": [{"role": "user", "content": ""}]},
        "all messages must have non-empty content",
    ),
    "empty_middle_assistant": (
        {"messages": [*HI, {"role": "assistant", "content": ""}, *HI]},
        "all messages must have non-empty content",
    ),
    "prefill_trailing_whitespace": (
        {"messages": [*HI, {"role": "assistant", "content": "Sure "}]},
        "cannot end with trailing whitespace",
    ),
    "tool_use_without_result": (
        {"messages": [*HI, assistant(TOOL_CALL), user(say("well?"))]},
        "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1",
    ),
    "tool_use_as_last_message": (
        {"messages": [*HI, assistant(TOOL_CALL)]},
        "ids were found without `tool_result` blocks immediately after",
    ),
    "tool_result_not_immediately_after": (
        {"messages": [*HI, assistant(TOOL_CALL), assistant(say("hm")), user(TOOL_RESULT)]},
        "ids were found without `tool_result` blocks immediately after: toolu_1",
    ),
    "tool_result_not_first": (
        {"messages": [*HI, assistant(TOOL_CALL), user(say("here"), TOOL_RESULT)]},
        "`tool_result` blocks must come first",
    ),
    "unexpected_tool_result": (
        {"messages": [user(TOOL_RESULT)]},
        "unexpected `tool_use_id` found in `tool_result` blocks: toolu_1",
    ),
    "tool_result_for_older_turn": (
        {
            "messages": [
                *HI,
                assistant(TOOL_CALL),
                user(TOOL_RESULT),
                assistant(say("ok")),
                user(TOOL_RESULT),
            ]
        },
        "unexpected `tool_use_id` found in `tool_result` blocks: toolu_1",
    ),
    "duplicate_tool_use_ids": (
        {
            "messages": [
                *HI,
                assistant(TOOL_CALL),
                user(TOOL_RESULT),
                assistant(TOOL_CALL),
                user(TOOL_RESULT),
            ]
        },
        "`tool_use` ids must be unique",
    ),
    "tool_name_pattern": (
        {"tools": [{"name": "get offer!", "input_schema": {"type": "object"}}]},
        "String should match pattern",
    ),
    "tool_name_too_long": (
        {"tools": [{"name": "x" * 65, "input_schema": {"type": "object"}}]},
        "String should match pattern",
    ),
    "tool_names_unique": ({"tools": [TOOLS[0], TOOLS[0]]}, "Tool names must be unique"),
    "tool_schema_not_object": (
        {"tools": [{"name": "t", "input_schema": {"type": "array"}}]},
        "input_schema.type: Input should be 'object'",
    ),
    "tool_schema_missing": ({"tools": [{"name": "t"}]}, "input_schema: Field required"),
    "tool_choice_unknown_tool": (
        {"tools": TOOLS, "tool_choice": {"type": "tool", "name": "nope"}},
        "Tool 'nope' not found",
    ),
    "tool_choice_bad_type": (
        {"tools": TOOLS, "tool_choice": {"type": "sometimes"}},
        "does not match any of the expected tags",
    ),
    "thinking_budget_too_small": (
        {"thinking": {"type": "enabled", "budget_tokens": 1000}},
        "budget_tokens: Input should be greater than or equal to 1024",
    ),
    "thinking_budget_not_below_max_tokens": (
        {"max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 2000}},
        "`max_tokens` must be greater than `thinking.budget_tokens`",
    ),
    "thinking_with_forced_any": (
        {"tools": TOOLS, "tool_choice": {"type": "any"}, "thinking": THINKING},
        "Thinking may not be enabled when tool_choice forces tool use",
    ),
    "thinking_with_forced_tool": (
        {
            "tools": TOOLS,
            "tool_choice": {"type": "tool", "name": "get_offer"},
            "thinking": THINKING,
        },
        "Thinking may not be enabled when tool_choice forces tool use",
    ),
    "empty_system_block": ({"system": [say("")]}, "system: text content blocks must be non-empty"),
    "unknown_field": ({"extra_body": {"sytem": "typo"}}, "sytem: Extra inputs are not permitted"),
}


@pytest.mark.parametrize("case", REJECTED.keys())
def test_invalid_requests_are_rejected(
    fake_model: FakeModelServer, client: anthropic.Anthropic, case: str
):
    params, expected = REJECTED[case]
    fake_model.script(Turn(text("never sent")))
    with pytest.raises(anthropic.BadRequestError) as excinfo:
        create(client, **params)

    err = excinfo.value
    assert err.status_code == 400
    assert err.body["type"] == "error"
    assert err.body["error"]["type"] == "invalid_request_error"
    assert expected in err.body["error"]["message"]
    assert expected in err.message
    assert fake_model.pending == 1  # a rejected request consumes no script entry
    assert len(fake_model.requests) == 1
    assert fake_model.requests[0].error == err.body["error"]["message"]
    assert fake_model.rejections == [err.body["error"]["message"]]


ACCEPTED = {
    "consecutive_user_messages": {"messages": [*HI, *HI]},
    "consecutive_assistant_messages": {"messages": [*HI, assistant(say("a")), assistant(say("b"))]},
    "empty_prefill": {"messages": [*HI, {"role": "assistant", "content": ""}]},
    "prefill": {"messages": [*HI, {"role": "assistant", "content": "Sure:"}]},
    "history_tool_not_in_tools": {
        "messages": [*HI, assistant(say("x"), TOOL_CALL), user(TOOL_RESULT, say("go on"))]
    },
    "tool_result_list_content": {
        "messages": [
            *HI,
            assistant(TOOL_CALL),
            user({**TOOL_RESULT, "content": [say("ok")], "is_error": True}),
        ]
    },
    "tool_choice_tool": {"tools": TOOLS, "tool_choice": {"type": "tool", "name": "get_offer"}},
    "tool_choice_none": {"tools": TOOLS, "tool_choice": {"type": "none"}},
    "thinking_with_auto": {"tools": TOOLS, "tool_choice": {"type": "auto"}, "thinking": THINKING},
    "system_blocks": {"system": [say("You are Loopdesk.")]},
}


@pytest.mark.parametrize("case", ACCEPTED.keys())
def test_valid_requests_are_accepted(
    fake_model: FakeModelServer, client: anthropic.Anthropic, case: str
):
    fake_model.script(Turn(text("fine")))
    assert create(client, **ACCEPTED[case]).content[0].text == "fine"
    assert fake_model.rejections == []
    assert fake_model.pending == 0


def test_rejected_request_does_not_consume_script(
    fake_model: FakeModelServer, client: anthropic.Anthropic
):
    fake_model.script(Turn(text("first")), Turn(text("second")))
    with pytest.raises(anthropic.BadRequestError):
        create(client, messages=[user(say(""))])
    assert create(client).content[0].text == "first"
    assert create(client).content[0].text == "second"
    assert [r.error is None for r in fake_model.requests] == [False, True, True]
    assert [type(r.reply).__name__ for r in fake_model.requests] == ["NoneType", "Turn", "Turn"]


def test_prompt_too_long(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.context_window = 1000
    messages = [{"role": "user", "content": "x" * 3200}]  # 800 tokens
    body = {"model": MODEL, "max_tokens": 201, "messages": messages}
    assert count_request_tokens(body) == 800

    with pytest.raises(anthropic.BadRequestError) as excinfo:
        create(client, messages=messages, max_tokens=201)
    message = excinfo.value.body["error"]["message"]
    assert message == "prompt is too long: 800 tokens + 201 max_tokens > 1000 maximum"

    fake_model.script(Turn(text("just fits")))
    assert create(client, messages=messages, max_tokens=200).content[0].text == "just fits"


def test_prompt_too_long_default_window(fake_model: FakeModelServer, client: anthropic.Anthropic):
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long: .* > 200000 maximum"):
        create(client, messages=[{"role": "user", "content": "word " * 160_000}])


def test_count_request_tokens_formula():
    tools = [TOOLS[1]]
    body = {
        "system": [say("abcd" * 10)],
        "tools": tools,
        "messages": [
            {"role": "user", "content": "12345"},
            assistant(
                {"type": "thinking", "thinking": "th", "signature": "s"},
                say("abc"),
                {**TOOL_CALL, "input": {"a": 1}},
            ),
            user({**TOOL_RESULT, "content": [say("xyz")]}, say("q")),
        ],
    }
    chars = 40 + 5 + 2 + 3 + len(json.dumps({"a": 1})) + 3 + 1 + len(json.dumps(tools))
    assert count_request_tokens(body) == math.ceil(chars / 4)


def test_count_tokens_endpoint(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(Turn(text("still queued")))
    result = client.messages.count_tokens(
        model=MODEL, system="You are Loopdesk.", messages=HI, tools=TOOLS
    )
    expected = count_request_tokens({"system": "You are Loopdesk.", "messages": HI, "tools": TOOLS})
    assert result.input_tokens == expected
    assert fake_model.pending == 1  # count_tokens consumes nothing
    assert fake_model.requests == []
    assert fake_model.count_tokens_requests[0]["system"] == "You are Loopdesk."

    with pytest.raises(anthropic.BadRequestError, match="non-empty"):
        client.messages.count_tokens(model=MODEL, messages=[user(say(""))])


# --------------------------------------------------------------------------------------
# errors and retries
# --------------------------------------------------------------------------------------


def test_529_then_success_is_retried(fake_model: FakeModelServer):
    fake_model.script(api_error(529, "overloaded_error", "Overloaded", retry_after=0.01), "Back!")
    with (
        make_client(fake_model, max_retries=2) as c,
        c.messages.stream(model=MODEL, max_tokens=1024, messages=HI) as stream,
    ):
        assert stream.get_final_text() == "Back!"
    assert [r.headers["x-stainless-retry-count"] for r in fake_model.requests] == ["0", "1"]


def test_retry_after_is_honoured(fake_model: FakeModelServer):
    fake_model.script(
        api_error(429, "rate_limit_error", "Slow down", retry_after=0.05),
        api_error(500, "api_error", "Internal server error", headers={"retry-after": "0.05"}),
        "Finally",
    )
    started = time.monotonic()
    with make_client(fake_model, max_retries=2) as c:
        assert create(c).content[0].text == "Finally"
    elapsed = time.monotonic() - started
    # Two 0.05 s waits instead of the SDK's own backoff (>= 0.375 s, then >= 0.75 s).
    assert 0.1 <= elapsed < 1.0  # the SDK's fallback backoff would total >= 1.125 s
    assert len(fake_model.requests) == 3


def test_error_statuses_and_shapes(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(
        api_error(529, "overloaded_error", "Overloaded"),
        api_error(429),
        api_error(500),
        api_error(400, "invalid_request_error", "scripted"),
    )
    expected = [
        (anthropic.OverloadedError, 529, "overloaded_error"),
        (anthropic.RateLimitError, 429, "rate_limit_error"),
        (anthropic.InternalServerError, 500, "api_error"),
        (anthropic.BadRequestError, 400, "invalid_request_error"),
    ]
    for error_class, status, kind in expected:
        with pytest.raises(error_class) as excinfo:
            create(client)
        assert excinfo.value.status_code == status
        assert excinfo.value.body["error"]["type"] == kind
        assert excinfo.value.type == kind
        assert excinfo.value.request_id.startswith("req_")
    assert fake_model.rejections == []  # scripted errors are not validation rejections


def test_retries_exhausted(fake_model: FakeModelServer):
    fake_model.script(*[api_error(529, retry_after=0.01)] * 3, "unreached")
    with make_client(fake_model, max_retries=2) as c, pytest.raises(anthropic.OverloadedError):
        create(c)
    assert len(fake_model.requests) == 3
    assert fake_model.pending == 1


def test_mid_stream_error(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(Turn(text("partial answer "), stream_error("overloaded_error")), "unused")
    received: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as excinfo:  # noqa: SIM117
        with client.messages.stream(model=MODEL, max_tokens=1024, messages=HI) as stream:
            received.extend(stream.text_stream)
    assert "".join(received) == "partial answer "
    assert excinfo.value.body["type"] == "error"
    assert excinfo.value.body["error"]["type"] == "overloaded_error"
    assert len(fake_model.requests) == 1  # the SDK does not retry a stream that already began


def test_mid_stream_error_on_raw_wire(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(Turn(text("some text"), stream_error("api_error", "boom")))
    events = sse_events(raw_sse_lines(client))
    assert events[-1] == (
        "error",
        {"type": "error", "error": {"type": "api_error", "message": "boom"}},
    )
    assert "message_stop" not in [k for k, _ in events]


def test_stream_error_in_non_streaming_call(
    fake_model: FakeModelServer, client: anthropic.Anthropic
):
    fake_model.script(Turn(text("partial"), stream_error("overloaded_error")))
    with pytest.raises(anthropic.OverloadedError):
        create(client)


# --------------------------------------------------------------------------------------
# timing knobs, responder, recording
# --------------------------------------------------------------------------------------


def test_delays_and_stall(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(
        Turn(
            text("a b c d e"),
            delay_first=0.1,
            token_delay=0.02,
            stall_after=2,
            stall_seconds=0.25,
        )
    )
    stamps: list[float] = []
    started = time.monotonic()
    for event in create(client, stream=True):
        if event.type == "content_block_delta":
            stamps.append(time.monotonic())
    first, gaps = stamps[0] - started, [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    assert first >= 0.1
    assert len(stamps) == 5
    # Server-side waits are sequential, so the total is a robust lower bound ...
    assert stamps[-1] - started >= 0.1 + 0.25 + 3 * 0.02
    # ... and the long gap sits after the 2nd delta (margin for a lagging client).
    assert gaps[1] >= 0.15 and max(gaps) == gaps[1]


def test_stop_interrupts_a_stalled_stream(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(Turn(text("one two three"), stall_after=1, stall_seconds=60))
    threading.Timer(0.2, fake_model.stop).start()
    started = time.monotonic()
    with pytest.raises((anthropic.APIConnectionError, httpx2.TransportError)):
        for _ in create(client, stream=True):
            pass
    assert time.monotonic() - started < 3


def test_responder_and_default_reply(fake_model: FakeModelServer, client: anthropic.Anthropic):
    assert create(client).content[0].text == NO_REPLY_TEXT

    seen: list[int] = []

    def responder(body: dict[str, Any]) -> Turn:
        seen.append(len(body["messages"]))
        return Turn(tool_use("list_offers"))

    fake_model.responder = responder
    fake_model.script("scripted first")
    assert create(client, tools=TOOLS).content[0].text == "scripted first"
    message = create(client, tools=TOOLS)
    assert message.stop_reason == "tool_use" and message.content[0].name == "list_offers"
    assert seen == [1]


def test_requests_are_recorded(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script("a", "b")
    create(client, system="sys")
    with pytest.raises(anthropic.BadRequestError):
        create(client, max_tokens=0)
    with client.messages.stream(model=MODEL, max_tokens=10, messages=HI) as stream:
        stream.until_done()

    first, rejected, streamed = fake_model.requests
    assert first == {"model": MODEL, "max_tokens": 2048, "messages": HI, "system": "sys"}
    assert first.path == "/v1/messages" and first.error is None
    assert first.headers["anthropic-version"]
    assert rejected["max_tokens"] == 0 and "max_tokens" in rejected.error
    assert streamed["stream"] is True
    assert fake_model.rejections == [rejected.error]
    assert fake_model.rejections[0].body == dict(rejected)
    assert [r["content"][0]["text"] for r in fake_model.replies] == ["a", "b"]
    assert fake_model.last_request is streamed


def test_concurrent_requests(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.script(*[Turn(text(f"reply {n}"), token_delay=0.01) for n in range(8)])
    results: list[str] = []

    def call() -> None:
        with client.messages.stream(model=MODEL, max_tokens=10, messages=HI) as stream:
            results.append(stream.get_final_text())

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert sorted(results) == sorted(f"reply {n}" for n in range(8))
    assert fake_model.pending == 0


# --------------------------------------------------------------------------------------
# schema_instance
# --------------------------------------------------------------------------------------

HEX_PATTERN = "^#[0-9a-fA-F]{6}$"
RATIO_PATTERN = "^[1-9][0-9]?:[1-9][0-9]?$"
SHEET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "color": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 12},
                "hex": {"type": "string", "pattern": HEX_PATTERN},
            },
            "required": ["name", "hex"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 200},
        "summary": {"type": "string", "minLength": 80, "maxLength": 120},
        "aspect_ratio": {"type": "string", "pattern": RATIO_PATTERN},
        "palette": {
            "type": "array",
            "minItems": 3,
            "maxItems": 8,
            "items": {"$ref": "#/$defs/color"},
        },
        "variants": {
            "type": "array",
            "minItems": 2,
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {
                    "headline": {"type": "string", "maxLength": 30},
                    "tone": {"enum": ["warm", "bold", "playful"]},
                    "scenes": {
                        "type": "array",
                        "maxItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "number": {"type": "integer", "minimum": 1, "maximum": 12},
                                "duration_seconds": {
                                    "type": "number",
                                    "exclusiveMinimum": 0,
                                    "maximum": 120,
                                },
                            },
                            "required": ["number"],
                        },
                    },
                },
                "required": ["headline", "tone"],
            },
        },
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "formats": {
            "type": "array",
            "items": {"enum": ["square", "story", "banner"]},
            "minItems": 3,
            "uniqueItems": True,
        },
        "contact": {"type": "string", "format": "email"},
        "launch": {"type": "string", "format": "date"},
        "approved": {"type": "boolean"},
        "budget": {"type": ["integer", "null"], "minimum": 100, "multipleOf": 50},
        "kind": {"const": "element_sheet"},
        "link": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}]},
        "notes": {"allOf": [{"type": "string", "minLength": 5}, {"maxLength": 40}]},
    },
    "required": ["title", "palette", "variants"],
    "additionalProperties": False,
}


def assert_valid(schema: dict[str, Any], instance: Any) -> None:
    errors = [e.message for e in Draft202012Validator(schema).iter_errors(instance)]
    assert errors == [], (errors, instance)


def all_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for item in value for s in all_strings(item)]
    return []


def test_schema_instance_is_valid_deterministic_and_fills_everything():
    instance = schema_instance(SHEET_SCHEMA)
    assert_valid(SHEET_SCHEMA, instance)
    assert schema_instance(SHEET_SCHEMA) == instance
    assert list(instance) == list(SHEET_SCHEMA["properties"])  # optional properties too
    assert len(instance["palette"]) == 3  # minItems
    assert len(instance["variants"]) == 2 and len(instance["tags"]) == 2  # min(2, maxItems)
    assert len(instance["variants"][0]["scenes"]) == 1  # maxItems
    assert instance["formats"] == ["square", "story", "banner"]  # unique enum values
    assert instance["variants"][0]["tone"] == "warm"  # enum: the first value
    assert instance["kind"] == "element_sheet"
    assert instance["budget"] % 50 == 0 and instance["budget"] >= 100
    assert 0 < instance["variants"][0]["scenes"][0]["duration_seconds"] <= 120
    assert instance["title"].startswith("Sample title")
    assert "@" in instance["contact"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", instance["launch"])
    strings = [s for s in all_strings(instance) if s not in ("warm", "square", "story", "banner")]
    strings.remove("element_sheet")
    assert len(strings) == len(set(strings))  # no two positions repeat a string
    assert instance["variants"][0]["headline"] != instance["variants"][1]["headline"]


@pytest.mark.parametrize(
    "pattern",
    [
        HEX_PATTERN,
        RATIO_PATTERN,
        r"^\d{4}-\d{2}-\d{2}$",
        r"^[A-Z]{2,3}-\d+$",
        r"^(?:foo|bar)_[a-z]{3,5}$",
        r"^(?P<major>\d+)\.(\d+)(-[a-z]+)?$",
        r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$",
        r"^\+?[0-9 ]{7,15}$",
        r"^[a-z0-9-]+$",
        r"^\$\d+\.\d{2}$",
        r"^(ab|cd){2}x*$",
        r"\d",
    ],
)
def test_schema_instance_patterns(pattern: str):
    values = [schema_instance({"type": "string", "pattern": pattern}, hint=f"f{n}") for n in (1, 2)]
    for value in values:
        assert re.search(pattern, value), value
    schema = {"type": "array", "items": {"type": "string", "pattern": pattern}}
    array = schema_instance({**schema, "minItems": 3, "uniqueItems": True})
    assert all(re.search(pattern, value) for value in array)
    assert len(set(array)) == 3, array


def test_schema_instance_string_lengths_and_hint():
    assert schema_instance({"type": "string"}, hint="headline") == "Sample headline 1"
    assert schema_instance({}) == "Sample value 1"  # {} is a string
    short = schema_instance({"type": "string", "maxLength": 8}, hint="headline")
    assert len(short) <= 8 and short.endswith(" 1")
    long = schema_instance({"type": "string", "minLength": 300, "maxLength": 310}, hint="body")
    assert 300 <= len(long) <= 310 and long.startswith("Sample body 1")
    assert schema_instance({"properties": {"a": {}}}) == {"a": "Sample a 1"}  # no type: object
    assert schema_instance({"type": ["null", "integer"]}) == 1
    assert schema_instance({"type": "null"}) is None


def test_schema_instance_numbers():
    cases = [
        {"type": "integer"},
        {"type": "integer", "minimum": 7},
        {"type": "integer", "maximum": -3},
        {"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 5},
        {"type": "integer", "minimum": 10, "multipleOf": 7},
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.1},
        {"type": "number", "minimum": 0.25, "maximum": 0.75, "multipleOf": 0.25},
    ]
    values = [schema_instance(schema) for schema in cases]
    for schema, value in zip(cases, values, strict=True):
        assert_valid(schema, value)
    assert values[:5] == [1, 7, -3, 4, 14]
    with pytest.raises(ValueError, match="no integer"):
        schema_instance({"type": "integer", "minimum": 3, "maximum": 2})


def test_schema_instance_refs_recursion_and_maps():
    tree = {
        "definitions": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/definitions/node"}},
                },
                "required": ["label"],
            }
        },
        "$ref": "#/definitions/node",
    }
    instance = schema_instance(tree)
    assert_valid(tree, instance)
    # The recursion stops where the $ref comes round again: required properties only.
    assert instance["children"] == [{"label": "Sample label 2"}, {"label": "Sample label 3"}]
    assert schema_instance({"type": "object", "additionalProperties": {"type": "integer"}}) == {
        "key_1": 1
    }
    with pytest.raises(ValueError, match="too deep"):
        schema_instance({"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["x"]})


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string", "pattern": r"^a\bb$"}, "cannot generate a string matching"),
        ({"type": "string", "pattern": "^x$", "minLength": 3}, "cannot generate a string matching"),
        ({"type": "string", "pattern": r"^(?=\d)\d$"}, "lookarounds"),
        ({"type": "string", "pattern": r"^(a)\1$"}, "backreferences"),
        ({"type": "string", "pattern": "^[a-z"}, "does not compile"),
        ({"type": "array", "minItems": 3, "maxItems": 2}, "minItems"),
        ({"type": "object", "properties": {"a": {"oneOf": [{}, {}]}}}, "invalid instance"),
    ],
)
def test_schema_instance_raises_when_it_cannot(schema: dict[str, Any], message: str):
    with pytest.raises(ValueError, match=message):
        schema_instance(schema)


# --------------------------------------------------------------------------------------
# strict mode
# --------------------------------------------------------------------------------------

SHEET_TOOLS = [
    *TOOLS,
    {"name": "write_sheet", "description": "Write the sheet.", "input_schema": SHEET_SCHEMA},
]
FORCE_SHEET = {"type": "tool", "name": "write_sheet"}
GUESS_SYSTEM = (
    "You write ad copy. Output a JSON object with a `title`, `angle_notes` and `variants` "
    '(each {"headline", "body"}).'
)
FENCED = re.compile(r"```json\n(.*)\n```", re.DOTALL)


def test_strict_is_off_by_default(fake_model: FakeModelServer, client: anthropic.Anthropic):
    assert fake_model.strict is False
    fake_model.script(Turn(tool_use("write_sheet", {"title": "scripted"})))
    message = create(client, tools=SHEET_TOOLS, tool_choice=FORCE_SHEET)
    assert message.content[0].input == {"title": "scripted"}
    assert fake_model.pending == 0 and fake_model.strict_answers == []


def test_strict_forced_tool_gets_a_schema_valid_input(
    fake_model: FakeModelServer, client: anthropic.Anthropic
):
    fake_model.strict = True
    fake_model.script("scripted, for the host")
    message = create(client, tools=SHEET_TOOLS, tool_choice=FORCE_SHEET)

    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["tool_use"]
    call = message.content[0]
    assert call.name == "write_sheet" and call.id.startswith("toolu_")
    assert_valid(SHEET_SCHEMA, call.input)
    assert call.input == schema_instance(SHEET_SCHEMA, hint="write_sheet")
    assert all(re.fullmatch(HEX_PATTERN, c["hex"]) for c in call.input["palette"])
    assert re.fullmatch(RATIO_PATTERN, call.input["aspect_ratio"])
    assert fake_model.pending == 1  # the script is untouched
    assert fake_model.strict_answers == ["write_sheet"]
    assert fake_model.requests[0].reply.blocks[0].input == call.input
    assert fake_model.replies[0]["content"][0]["input"] == call.input


def test_strict_forced_tool_streams_its_input():
    with FakeModelServer(strict=True) as server, make_client(server) as c:
        assert server.strict is True
        with c.messages.stream(
            model=MODEL, max_tokens=1024, messages=HI, tools=SHEET_TOOLS, tool_choice=FORCE_SHEET
        ) as stream:
            pieces = [
                e.delta.partial_json
                for e in stream
                if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
            ]
            message = stream.get_final_message()
        assert len(pieces) >= 2
        assert json.loads("".join(pieces)) == message.content[0].input
        assert_valid(SHEET_SCHEMA, message.content[0].input)
        assert message.stop_reason == "tool_use"
        assert server.strict_answers == ["write_sheet"]
        assert server.pending == 0 and server.rejections == []


def test_strict_tool_choice_any_takes_the_first_tool(
    fake_model: FakeModelServer, client: anthropic.Anthropic
):
    fake_model.strict = True
    tools = [SHEET_TOOLS[2], *TOOLS]
    message = create(client, tools=tools, tool_choice={"type": "any"})
    assert message.content[0].name == "write_sheet"
    assert_valid(SHEET_SCHEMA, message.content[0].input)
    message = create(client, tools=TOOLS, tool_choice={"type": "any"})
    assert message.content[0].name == "get_offer"
    assert message.content[0].input == {"offer_id": 1}
    assert fake_model.strict_answers == ["write_sheet", "get_offer"]


def test_strict_host_requests_still_take_the_script(
    fake_model: FakeModelServer, client: anthropic.Anthropic
):
    fake_model.strict = True
    fake_model.script(
        Turn(tool_use("get_offer", {"offer_id": 3})), "auto reply", "none reply", "plain reply"
    )
    auto = create(client, tools=SHEET_TOOLS, tool_choice={"type": "auto"})
    assert auto.content[0].input == {"offer_id": 3}
    assert create(client, tools=SHEET_TOOLS).content[0].text == "auto reply"
    # tool_choice none, even when JSON is asked for: the request has tools.
    none = create(client, tools=TOOLS, tool_choice={"type": "none"}, system="Answer in JSON.")
    assert none.content[0].text == "none reply"
    assert create(client, system="You are Loopdesk.").content[0].text == "plain reply"
    forced = create(client, tools=SHEET_TOOLS, tool_choice=FORCE_SHEET)
    assert forced.content[0].name == "write_sheet"
    assert create(client).content[0].text == NO_REPLY_TEXT  # the script ran out as before
    assert fake_model.strict_answers == ["write_sheet"]
    assert len(fake_model.requests) == 6


def fenced_guess(reply: str) -> dict[str, Any]:
    assert reply.startswith("Sure! Here it is:\n\n```json\n"), reply
    assert reply.endswith("```\nTell me if you want changes."), reply
    match = FENCED.search(reply)
    assert match is not None
    return json.loads(match.group(1))


def test_strict_json_request_without_tools_gets_a_guess(
    fake_model: FakeModelServer, client: anthropic.Anthropic
):
    fake_model.strict = True
    fake_model.script("scripted")
    message = create(client, system=GUESS_SYSTEM)
    assert message.stop_reason == "end_turn"
    guess = fenced_guess(message.content[0].text)
    # The keys come from the prompt's text, flat: the nested shape is guessed wrong.
    assert list(guess) == ["title", "angle_notes", "variants", "headline", "body"]
    assert all(isinstance(value, str) and value for value in guess.values())

    with client.messages.stream(
        model=MODEL,
        max_tokens=1024,
        system=[{"type": "text", "text": GUESS_SYSTEM}],
        messages=HI,
    ) as stream:
        streamed = stream.get_final_text()
    assert fenced_guess(streamed) == guess

    # Asked in the last user message (any case), keys from it when the system has none.
    ask = [{"role": "user", "content": 'Reply as json with "name" and "price".'}]
    assert list(fenced_guess(create(client, messages=ask).content[0].text)) == ["name", "price"]
    assert fake_model.strict_answers == ["guess", "guess", "guess"]
    assert fake_model.pending == 1
    no_json = [{"role": "user", "content": "No jsonish talk here"}]  # the word JSON only
    assert create(client, messages=no_json).content[0].text == "scripted"


def test_strict_mode_validates_as_before(fake_model: FakeModelServer, client: anthropic.Anthropic):
    fake_model.strict = True
    with pytest.raises(anthropic.BadRequestError) as excinfo:
        create(client, tools=SHEET_TOOLS, tool_choice=FORCE_SHEET, thinking=THINKING)
    assert excinfo.value.status_code == 400
    assert "Thinking may not be enabled when tool_choice forces tool use" in str(excinfo.value)
    with pytest.raises(anthropic.BadRequestError, match="Tool 'nope' not found"):
        create(client, tools=SHEET_TOOLS, tool_choice={"type": "tool", "name": "nope"})
    assert fake_model.strict_answers == []
    assert len(fake_model.rejections) == 2


def test_strict_unfillable_schema_is_a_500(
    fake_model: FakeModelServer, client: anthropic.Anthropic
):
    fake_model.strict = True
    impossible = {
        "name": "impossible",
        "input_schema": {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": r"^a\bb$"}},
        },
    }
    with pytest.raises(anthropic.InternalServerError, match="cannot fill the input_schema"):
        create(client, tools=[impossible], tool_choice={"type": "tool", "name": "impossible"})
    assert fake_model.strict_answers == ["impossible"]
