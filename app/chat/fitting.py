"""Fitting one request's messages into its input budget, in stages that each make progress
and run a bounded number of times (nothing here may spin: `make run` serves everyone from
one gevent worker).

0. A message larger than its share of the window is cut down (a pasted document, the
   results of one tool step).
1. Older turns go first, cut at a message the person typed (a tool_use keeps its result).
2. Within the turn (from the person's own message on), its oldest tool steps go whole:
   an assistant message with its tool_use blocks and their tool_result blocks together.
   The person's message and the latest step stay, with a note that steps were left out.
3. The largest tool results of what is left are shortened to one common length that
   fits, each with a note the model reads stating the original and the new length.
When even that does not fit (a single step larger than the window), `TurnTooLarge`: the
run ends with a clear error instead of sending a request the model would refuse. The
rows in the database always keep every result whole."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.chat.history import repair, tool_use_ids
from app.llm.budget import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    block_chars,
    cap_oversized,
    estimate_blocks,
    estimate_messages,
    estimate_text,
)

PER_MESSAGE_FRACTION = 0.4  # one message's largest share before it is truncated
MIN_RESULT_CHARS = 500  # a shortened result keeps at least this much of its start
# The search for the common length halves its range each pass: 40 cover any length.
SHORTEN_PASSES = 40
TURN_TOO_LARGE = "turn_too_large"
TURN_TOO_LARGE_TEXT = (
    "This step is too large for the model's context, even with the turn's older tool "
    "results left out and the rest shortened. Ask for fewer pages or files at a time."
)
DROPPED_NOTE = (
    "[The results of {count} earlier tool calls of this turn were left out to fit the "
    "context window.]"
)
SHORTENED_NOTE = "\n\n[result shortened from {original:,} to {kept:,} characters to fit]"

Messages = list[dict[str, Any]]


class TurnTooLarge(Exception):
    """Even the person's message and the latest step, shortened, exceed the budget."""

    code = TURN_TOO_LARGE

    def __init__(self) -> None:
        super().__init__(TURN_TOO_LARGE_TEXT)
        self.text = TURN_TOO_LARGE_TEXT


def fit_messages(messages: Messages, budget: int, keep_thinking: bool) -> Messages:
    """The messages within `budget` tokens (by our estimate), or TurnTooLarge."""
    originals = {b["tool_use_id"]: b for m in messages for b in _results(m)}
    return _Fitting(budget, keep_thinking, originals).fit(messages)


@dataclass
class _Fitting:
    budget: int
    keep_thinking: bool
    # Each tool_result block as its row keeps it, by tool_use id: a result shortened
    # twice is shortened from its original, and its note says the original length.
    originals: dict[str, dict[str, Any]]

    def fit(self, messages: Messages) -> Messages:
        per_message = int(self.budget * PER_MESSAGE_FRACTION)
        messages = [self.capped(m, per_message) for m in messages]
        for stage in (self.drop_older_turns, self.drop_oldest_steps, self.shorten_results):
            if estimate_messages(messages) <= self.budget:
                return messages
            messages = stage(messages)
        if estimate_messages(messages) > self.budget:
            raise TurnTooLarge()
        return messages

    def capped(self, message: dict[str, Any], per_message: int) -> dict[str, Any]:
        """A message within its share of the window: a pasted document is truncated, the
        largest results of one tool step are shortened."""
        if _results(message):
            return self.shorten_results([message], per_message)[0]
        return cap_oversized([message], per_message)[0]

    def drop_older_turns(self, messages: Messages) -> Messages:
        """From the oldest turn that lets the rest fit, else from the latest turn: each
        cut at a message the person typed, so no tool pair is split."""
        starts = [
            i for i, m in enumerate(messages) if i > 0 and m["role"] == "user" and not _results(m)
        ]
        if not starts:
            return messages
        sizes = [estimate_blocks(m["content"]) for m in messages]
        cut = next((s for s in starts if sum(sizes[s:]) <= self.budget), starts[-1])
        return repair(messages[cut:], self.keep_thinking)

    def drop_oldest_steps(self, messages: Messages) -> Messages:
        """The turn without its oldest tool steps, each an assistant message dropped with
        the results of its calls, until the rest fits. The person's message and the
        latest step stay; a note after the latest results says how many calls went."""
        steps = [i for i, m in enumerate(messages) if i > 0 and m["role"] == "assistant"][:-1]
        if not steps or messages[-1]["role"] != "user":
            return messages
        total = estimate_messages(messages) + estimate_text(DROPPED_NOTE) + 2
        dropped: set[int] = set()
        ids: set[str] = set()
        for index in steps:
            if total <= self.budget:
                break
            step_ids = set(tool_use_ids(messages[index]))
            answers = [b for b in _results(messages[index + 1]) if b["tool_use_id"] in step_ids]
            total -= estimate_blocks(messages[index]["content"]) + estimate_blocks(answers)
            dropped.add(index)
            ids |= step_ids
        kept = []
        for index, message in enumerate(messages):
            content = [
                b
                for b in message["content"]
                if b.get("type") != "tool_result" or b["tool_use_id"] not in ids
            ]
            if index not in dropped and content:
                kept.append({**message, "content": content})
        if ids:
            note = {"type": "text", "text": DROPPED_NOTE.format(count=len(ids))}
            kept[-1] = {**kept[-1], "content": [*kept[-1]["content"], note]}
        return repair(kept, self.keep_thinking)

    def shorten_results(self, messages: Messages, budget: int | None = None) -> Messages:
        """Every result longer than one common length cut to it: the longest length that
        fits (halving the range, a bounded number of passes), else MIN_RESULT_CHARS."""
        budget = self.budget if budget is None else budget
        lengths = [self.length(b) for m in messages for b in _results(m)]
        if not lengths or self.estimate_at(messages, max(lengths)) <= budget:
            return messages
        low, high = MIN_RESULT_CHARS, max(lengths)
        if high > low and self.estimate_at(messages, low) <= budget:
            for _ in range(SHORTEN_PASSES):
                if high - low <= 1:
                    break
                middle = (low + high) // 2
                if self.estimate_at(messages, middle) <= budget:
                    low = middle
                else:
                    high = middle
        return [
            {**m, "content": [self.shorten(b, low) for b in m["content"]]} if _results(m) else m
            for m in messages
        ]

    def original(self, block: dict[str, Any]) -> dict[str, Any]:
        return self.originals.get(block["tool_use_id"], block)

    def length(self, block: dict[str, Any]) -> int:
        return block_chars(self.original(block))

    def estimate_at(self, messages: Messages, level: int) -> int:
        """estimate_messages of the messages with their results cut to `level`."""
        total = 0
        for message in messages:
            chars = 0
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    chars += _shortened_chars(self.length(block), level)
                else:
                    chars += block_chars(block)
            total += MESSAGE_OVERHEAD_TOKENS + math.ceil(chars / CHARS_PER_TOKEN)
        return total

    def shorten(self, block: dict[str, Any], level: int) -> dict[str, Any]:
        if block.get("type") != "tool_result":
            return block
        original = self.original(block)
        if block_chars(original) <= level:
            return original
        text = _result_text(original)
        note = SHORTENED_NOTE.format(original=len(text), kept=level)
        return {**original, "content": text[:level] + note}


def _results(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in message["content"] if b.get("type") == "tool_result"]


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _shortened_chars(length: int, level: int) -> int:
    if length <= level:
        return length
    return level + len(SHORTENED_NOTE.format(original=length, kept=level))
