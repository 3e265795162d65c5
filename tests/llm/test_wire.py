"""What the model client sends and assembles (app/llm/wire.py): the body is the request as
given, whatever was sent before, and a turn's blocks are what the stream said."""

from __future__ import annotations

import json

from app.llm.client import StreamCallbacks
from app.llm.wire import RequestEncoder, TurnAccumulator

TOOLS = [
    {
        "name": "list_offers",
        "description": "The person's offers.",
        "input_schema": {"type": "object", "properties": {"limit": {"type": "integer"}}},
    },
    {"name": "ask", "description": "Ask the person.", "input_schema": {"type": "object"}},
]


def _request(tools) -> dict:
    return {
        "model": "claude-x",
        "max_tokens": 64,
        "system": "Be brief. «Ünïcode» stays as is.",
        "tools": tools,
        "messages": [{"role": "user", "content": "Hi"}],
    }


def test_the_body_is_the_request_streamed_even_when_a_tool_list_changes_in_place():
    encoder = RequestEncoder()
    tools = json.loads(json.dumps(TOOLS))
    first = encoder.body(_request(tools))
    assert json.loads(first) == {**_request(TOOLS), "stream": True}
    assert "«Ünïcode»".encode() in first

    tools[1]["description"] = "Ask the person, with choices."
    tools[0]["input_schema"]["properties"]["limit"]["minimum"] = 1
    changed = json.loads(encoder.body(_request(tools)))
    assert changed["tools"] == tools
    assert json.loads(encoder.body(_request(TOOLS)))["tools"] == TOOLS
    assert json.loads(encoder.body(_request([])))["tools"] == []


def _events(*events: dict) -> tuple[TurnAccumulator, list[str]]:
    """The accumulator fed `events`, and the text pieces it passed on as they came."""
    texts: list[str] = []
    accumulator = TurnAccumulator(StreamCallbacks(on_text=texts.append))
    for event in events:
        accumulator.feed(event)
    return accumulator, texts


def _delta(index: int, **delta) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def test_a_turns_blocks_are_assembled_from_its_pieces():
    accumulator, texts = _events(
        {"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        _delta(0, type="thinking_delta", thinking="Let me "),
        _delta(0, type="thinking_delta", thinking="see."),
        _delta(0, type="signature_delta", signature="sig"),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "", "citations": None}},
        _delta(1, type="text_delta", text="Two "),
        _delta(1, type="text_delta", text="offers."),
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t1", "name": "ask", "input": {}, "caller": None}},
        _delta(2, type="input_json_delta", partial_json='{"question": '),
        _delta(2, type="input_json_delta", partial_json='"Which?"}'),
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}},
    )  # fmt: skip
    assert accumulator.content() == [
        {"type": "thinking", "thinking": "Let me see.", "signature": "sig"},
        {"type": "text", "text": "Two offers."},
        {"type": "tool_use", "id": "t1", "name": "ask", "input": {"question": "Which?"}},
    ]
    assert texts == ["Two ", "offers."]
    assert accumulator.stop_reason == "tool_use"
    assert accumulator.usage == {"input_tokens": 12, "output_tokens": 30}


def test_text_of_a_block_that_never_stopped_is_kept_and_a_tool_call_without_input_is_empty():
    accumulator, _ = _events(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "ask", "input": {}}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        _delta(1, type="text_delta", text="Cut "),
        _delta(1, type="text_delta", text="short"),
    )  # fmt: skip
    assert accumulator.content() == [
        {"type": "tool_use", "id": "t1", "name": "ask", "input": {}},
        {"type": "text", "text": "Cut short"},
    ]
