"""History rebuilt from rows: merged, capped without splitting tool pairs, repaired."""

from __future__ import annotations

import json

from app.chat.history import cap_messages, continuing_tool_loop_without_thinking, repair

DISMISSED = json.dumps({"dismissed": True})


def user(*blocks):
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def text(value):
    return {"type": "text", "text": value}


def use(tool_id, name="list_offers"):
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {}}


def result(tool_id, content="ok"):
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def test_unanswered_tool_use_gets_a_synthetic_dismissed_result():
    history = [user(text("hi")), assistant(text("checking"), use("t1")), user(text("hello?"))]
    assert repair(history, keep_thinking=False) == [
        user(text("hi")),
        assistant(text("checking"), use("t1")),
        user(result("t1", DISMISSED), text("hello?")),
    ]


def test_trailing_tool_use_and_back_to_back_assistants_are_answered():
    history = [user(text("hi")), assistant(use("t1")), assistant(text("more"), use("t2"))]
    repaired = repair(history, keep_thinking=False)
    # Same-role neighbours merge, so both tool_uses sit in one assistant turn, both answered.
    assert repaired == [
        user(text("hi")),
        assistant(use("t1"), text("more"), use("t2")),
        user(result("t1", DISMISSED), result("t2", DISMISSED)),
    ]


def test_empty_text_blocks_and_orphan_results_are_dropped():
    history = [
        user(text("   "), result("ghost"), text("real question")),
        assistant(text(""), text("answer")),
    ]
    assert repair(history, keep_thinking=False) == [
        user(text("real question")),
        assistant(text("answer")),
    ]


def test_results_are_put_first_and_in_tool_use_order():
    history = [
        user(text("go")),
        assistant(use("a"), use("b")),
        user(text("also this"), result("b"), result("a")),
    ]
    assert repair(history, keep_thinking=False)[-1] == user(
        result("a"), result("b"), text("also this")
    )


def test_leading_assistant_messages_are_dropped():
    history = [assistant(text("hello")), user(text("hi"))]
    assert repair(history, keep_thinking=False) == [user(text("hi"))]


def test_thinking_is_kept_only_when_thinking_is_on():
    block = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    history = [user(text("hi")), assistant(block, use("t1")), user(result("t1"))]
    assert repair(history, keep_thinking=True)[1]["content"][0] == block
    assert repair(history, keep_thinking=False)[1] == assistant(use("t1"))
    assert continuing_tool_loop_without_thinking(repair(history, keep_thinking=False))
    assert not continuing_tool_loop_without_thinking(repair(history, keep_thinking=True))


def _long_history(turns):
    history = []
    for n in range(turns):
        history += [
            user(text(f"q{n}")),
            assistant(use(f"t{n}")),
            user(result(f"t{n}")),
            assistant(text(f"a{n}")),
        ]
    return history


def _assert_pairs_whole(messages):
    assert messages[0]["role"] == "user"
    assert not any(b["type"] == "tool_result" for b in messages[0]["content"])
    for index, message in enumerate(messages):
        for block in message["content"]:
            if block["type"] == "tool_result":
                previous = messages[index - 1]["content"]
                assert any(b.get("id") == block["tool_use_id"] for b in previous)


def test_cap_never_separates_a_tool_result_from_its_tool_use():
    history = _long_history(30) + [user(text("latest question"))]
    for cap in range(1, 12):
        capped = repair(cap_messages(repair(history, False), cap), False)
        assert 1 <= len(capped) <= cap
        assert capped[-1] == user(text("latest question"))
        _assert_pairs_whole(capped)


def test_a_cap_too_small_for_a_tool_pair_keeps_the_pair_whole():
    history = _long_history(5) + [user(text("q5")), assistant(use("t5")), user(result("t5"))]
    capped = repair(cap_messages(repair(history, False), 1), False)
    assert capped == [user(text("q5")), assistant(use("t5")), user(result("t5"))]
    _assert_pairs_whole(capped)
