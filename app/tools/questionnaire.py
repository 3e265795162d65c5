"""The questionnaire card every UI tool asks the person with: building one, and checking
an answer against the card's own steps.

Every UI tool builds the same card (the loop adds toolUseId, tool and status):

    {"kind": "questionnaire", "title", "submitLabel", "resultKey", "freeTextKey"?,
     "steps": [{"id", "title", "input": single|multi|text, "options": [{"label", "value",
                "description"?, "thumbnail"?, "badge"?}], "required", "allowFreeText",
                "maxLength", "placeholder", "default"?}]}

A card with a `resultKey` has one step and is answered `{resultKey: value}` (or, when the
card has a `freeTextKey`, `{freeTextKey: "typed text"}`); a card whose `resultKey` is None
is answered `{"answers": {step_id: value}}`. `check_card_answer` validates either form
against the card's own steps, so every tool shares one validator."""

from __future__ import annotations

from typing import Any

from app.kinds import CardKind
from app.row_meta import AskedCard, Card
from app.tools.context import ToolContext

MAX_OPTIONS = 50
TEXT_MAX = 2000


# --- building cards --------------------------------------------------------------------


def option(value: Any, label: str, description: str = "", **decoration: Any) -> dict[str, Any]:
    built = {"label": label, "value": value}
    if description:
        built["description"] = description
    built.update({key: val for key, val in decoration.items() if val})
    return built


def step(
    step_id: str,
    title: str,
    input: str,
    options: list[dict[str, Any]] | None = None,
    *,
    required: bool = True,
    allow_free_text: bool = False,
    max_length: int = TEXT_MAX,
    placeholder: str = "",
    default: Any = None,
) -> dict[str, Any]:
    built = {
        "id": step_id,
        "title": title,
        "input": input,
        "options": options or [],
        "required": required,
        "allowFreeText": allow_free_text,
        "maxLength": max_length,
        "placeholder": placeholder,
    }
    if default is not None:
        built["default"] = default
    return built


def card(
    title: str,
    steps: list[dict[str, Any]],
    *,
    submit_label: str = "Continue",
    result_key: str | None = None,
    free_text_key: str | None = None,
) -> AskedCard:
    built: AskedCard = {
        "kind": CardKind.QUESTIONNAIRE,
        "title": title,
        "submitLabel": submit_label,
        "resultKey": result_key,
        "steps": steps,
    }
    if free_text_key:
        built["freeTextKey"] = free_text_key
    return built


# --- checking answers ------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    # Strict: True is not 1, "6" is not 6.
    return type(a) is type(b) and a == b


def _option_values(step_spec: dict[str, Any]) -> list[Any]:
    return [opt.get("value") for opt in step_spec.get("options") or []]


def _check_text(step_spec: dict[str, Any], value: Any) -> str | None:
    if not isinstance(value, str):
        return f"The answer to “{step_spec['title']}” must be text."
    limit = int(step_spec.get("maxLength") or TEXT_MAX)
    if len(value) > limit:
        return f"The answer to “{step_spec['title']}” is too long (at most {limit} characters)."
    if step_spec.get("required", True) and not value.strip():
        return f"“{step_spec['title']}” needs an answer."
    return None


def check_step(step_spec: dict[str, Any], value: Any) -> str | None:
    """None if `value` answers this step, else a message for the person."""
    title = step_spec["title"]
    if value is None or value == "" or value == []:
        return f"“{title}” needs an answer." if step_spec.get("required", True) else None
    kind = step_spec.get("input")
    if kind == "text":
        return _check_text(step_spec, value)
    values = _option_values(step_spec)
    if kind == "multi":
        if not isinstance(value, list):
            return f"The answer to “{title}” must be a list of choices."
        for item in value:
            if not any(_same(item, allowed) for allowed in values):
                return f"“{item}” is not one of the choices for “{title}”."
        return None
    if any(_same(value, allowed) for allowed in values):
        return None
    if step_spec.get("allowFreeText") and isinstance(value, str):
        return _check_text(step_spec, value)
    return f"That is not one of the choices for “{title}”."


def check_card_answer(ctx: ToolContext, card_spec: Card, result: Any) -> str | None:
    """The generic check for every questionnaire card (see the module docstring)."""
    if not isinstance(result, dict):
        return "The answer must be a JSON object."
    steps = card_spec.get("steps") or []
    result_key = card_spec.get("resultKey")
    if result_key is None:
        answers = result.get("answers")
        if not isinstance(answers, dict):
            return 'The answer must be {"answers": {...}} with one entry per step.'
        known = {step_spec["id"] for step_spec in steps}
        unknown = sorted(str(key) for key in answers if key not in known)
        if unknown:
            return f"Unknown question: {unknown[0]}."
        for step_spec in steps:
            error = check_step(step_spec, answers.get(step_spec["id"]))
            if error:
                return error
        return None
    if not steps:
        return "This card has no question to answer."
    only = steps[0]
    free_key = card_spec.get("freeTextKey")
    if free_key and free_key in result:
        if result_key in result:
            return f"Send either {result_key!r} or {free_key!r}, not both."
        if not (only.get("allowFreeText") or only.get("input") == "text"):
            return "This question needs one of its choices, not free text."
        return _check_text({**only, "required": True}, result[free_key])
    if result_key not in result:
        return f"The answer must include {result_key!r}."
    if only.get("input") == "text" and free_key:
        return f"This question takes free text: send {free_key!r}."
    return check_step({**only, "required": True}, result[result_key])
