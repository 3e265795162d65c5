"""A question an MCP server asks mid-call (an elicitation, in the protocol's stateless
"input required" form) as a questionnaire card: the run pauses on it like on a UI tool's,
and the person's answer resumes it on the same route. The card keeps what the call needs
to go on (the model's arguments, the server's opaque state and which step answers which
field); the resumed run calls the server again with the answers (`answers_for`), so any
process can carry it on."""

from __future__ import annotations

from typing import Any

from app.row_meta import AskedCard, Card
from app.tools.questionnaire import card, option, step
from app.tools.results import ToolFailure

MAX_FIELDS = 10


def question_card(arguments: dict[str, Any], asked: dict[str, Any]) -> AskedCard:
    """The card for the server's questions (`asked`: {questions, request_state})."""
    steps: list[dict[str, Any]] = []
    fields: dict[str, list[str]] = {}
    messages = []
    for key, question in (asked.get("questions") or {}).items():
        messages.append(str(question.get("message") or "The tool asks:"))
        schema = question.get("schema") or {}
        required = set(schema.get("required") or [])
        for name, spec in list((schema.get("properties") or {}).items())[:MAX_FIELDS]:
            step_id = f"q{len(steps) + 1}"
            fields[step_id] = [key, name, str(spec.get("type", "string"))]
            steps.append(_step(step_id, name, spec, name in required))
    if not steps:
        raise ToolFailure("The tool asked a question with nothing to fill in.")
    built = card(" ".join(messages)[:300], steps, submit_label="Send to the tool")
    built["resume"] = {
        "arguments": arguments,
        "requestState": asked.get("request_state"),
        "fields": fields,
    }
    return built


def _step(step_id: str, name: str, spec: dict[str, Any], required: bool) -> dict[str, Any]:
    title = str(spec.get("description") or spec.get("title") or name)[:200]
    if isinstance(spec.get("enum"), list):
        options = [option(value, str(value)) for value in spec["enum"][:50]]
        return step(step_id, title, "single", options, required=required)
    if spec.get("type") == "boolean":
        options = [option(True, "Yes"), option(False, "No")]
        return step(step_id, title, "single", options, required=required)
    return step(step_id, title, "text", required=required, max_length=2000)


def answers_for(answered: Card) -> dict[str, Any]:
    """The answers to send back, by the server's question key: {action, content}."""
    resume = answered.get("resume") or {}
    given = (answered.get("answer") or {}).get("answers") or {}
    contents: dict[str, dict[str, Any]] = {}
    for step_id, (key, name, kind) in (resume.get("fields") or {}).items():
        content = contents.setdefault(key, {})
        value = given.get(step_id)
        if value not in (None, ""):
            content[name] = _typed(value, kind, name)
    return {key: {"action": "accept", "content": content} for key, content in contents.items()}


def _typed(value: Any, kind: str, name: str) -> Any:
    """A text answer as the field's type (the person typed "4" for a number)."""
    if kind not in ("integer", "number") or not isinstance(value, str):
        return value
    try:
        number = float(value.strip())
    except ValueError:
        raise ToolFailure(f"The answer for {name} must be a number.") from None
    return int(number) if kind == "integer" and number.is_integer() else number
