"""One structured model call: the expected shape travels in the request as a forced tool.

A model knows only what the request tells it. A shape that lives only in our own files (or
is described in prose) is a guess for the model, so every call that expects JSON sends one
tool whose `input_schema` is the output schema, with `tool_choice` forcing it: the tool's
input is the answer. This works on the Anthropic API and on the servers that speak its
Messages API (LiteLLM, Ollama, vLLM, llama.cpp's server). Forced tool use cannot be combined
with extended thinking, so these calls never ask for thinking.

A server that answers with text anyway still works: the text is parsed as JSON after
stripping stray code fences. Every validation error (with its path, up to ten) goes back to
the model at once, as an `is_error` tool result; after two retries the call fails with the
problems named. Imports neither `app.tools` nor `app.agents`: both use it, as do memory and
onboarding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from app.llm.client import AssistantTurn, ModelClient, StreamCallbacks

FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)
MAX_REPORTED_ERRORS = 10
MAX_RETRIES = 2


def strip_code_fences(text: str) -> str:
    """Models wrap JSON in ```json fences now and then; take the inside."""
    match = FENCE.match(text)
    return match.group(1) if match else text.strip()


class StructuredOutputFailed(Exception):
    """The model never produced a valid answer; `problems` says what was wrong last."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True)
class Shape:
    """What the answer must look like: the forced tool's name, what it is for, its schema."""

    tool_name: str
    description: str
    schema: dict[str, Any]

    def tool(self) -> dict[str, Any]:
        return {
            "name": self.tool_name,
            "description": self.description,
            "input_schema": self.schema,
        }


def schema_problems(data: Any, schema: dict[str, Any]) -> list[str]:
    """Every way `data` misses `schema` (up to ten), each with where it is."""
    errors = sorted(
        Draft202012Validator(schema).iter_errors(data),
        key=lambda error: [str(part) for part in error.absolute_path],
    )
    problems = []
    for error in errors[:MAX_REPORTED_ERRORS]:
        where = "/".join(str(part) for part in error.absolute_path) or "the top level"
        problems.append(f"at {where}: {error.message}")
    if len(errors) > MAX_REPORTED_ERRORS:
        problems.append(f"and {len(errors) - MAX_REPORTED_ERRORS} more problems like these")
    return problems


def _answer(turn: AssistantTurn, shape: Shape) -> tuple[Any, list[str], dict[str, Any] | None]:
    """(the answer, its problems, the tool_use block it came in, if any)."""
    for block in turn.tool_uses:
        if block["name"] != shape.tool_name:
            continue
        data = block.get("input")
        if isinstance(data, dict) and "__invalid_json__" in data:
            return None, ["the tool input was not valid JSON"], block
        return data, schema_problems(data, shape.schema), block
    text = turn.text.strip()
    if not text:
        return None, [f"there was no answer: call the {shape.tool_name} tool"], None
    try:
        data = json.loads(strip_code_fences(text))
    except json.JSONDecodeError as error:
        return None, [f"the answer was not valid JSON ({error.msg} at line {error.lineno})"], None
    return data, schema_problems(data, shape.schema), None


def _retry_messages(
    turn: AssistantTurn, block: dict[str, Any] | None, problems: list[str], shape: Shape
) -> list[dict[str, Any]]:
    """The model's answer and what was wrong with it, in the form the answer took."""
    listed = "\n".join(f"- {problem}" for problem in problems)
    told = (
        f"The answer does not match the schema:\n{listed}\n"
        f"Call {shape.tool_name} again with the whole corrected answer."
    )
    if block is not None:
        content = [b for b in turn.content if b["type"] in ("text", "tool_use")]
        # Every tool_use needs its result; only the answer's own carries the errors.
        results = [
            {
                "type": "tool_result",
                "tool_use_id": other["id"],
                "is_error": True,
                "content": told if other is block else "Only one answer is read.",
            }
            for other in turn.tool_uses
        ]
        return [{"role": "assistant", "content": content}, {"role": "user", "content": results}]
    said = turn.text.strip() or "(empty)"
    return [{"role": "assistant", "content": said}, {"role": "user", "content": told}]


def structured_call(
    model: ModelClient,
    *,
    model_name: str,
    system: str,
    messages: list[dict[str, Any]],
    shape: Shape,
    max_tokens: int,
    on_progress: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """The model's answer in `shape`, validated; raises StructuredOutputFailed after two
    retries, and lets ModelError through. `on_progress` receives the answer as it streams
    (the tool input's JSON, or text from a server that answers in text); `should_stop`
    cuts the stream (StreamCancelled)."""
    callbacks = StreamCallbacks(
        on_text=on_progress, on_input_json=on_progress, should_stop=should_stop
    )
    messages = list(messages)
    problems: list[str] = []
    for _attempt in range(MAX_RETRIES + 1):
        turn = model.stream_turn(
            {
                "model": model_name,
                "max_tokens": max_tokens,
                "system": system,
                "messages": messages,
                "tools": [shape.tool()],
                "tool_choice": {"type": "tool", "name": shape.tool_name},
            },
            callbacks,
        )
        data, problems, block = _answer(turn, shape)
        if not problems:
            answer: dict[str, Any] = data
            return answer
        messages += _retry_messages(turn, block, problems, shape)
    raise StructuredOutputFailed(problems)
