"""The shapes kept in a row's meta and read in several places of chat: a card (a question
or a confirmation waiting for the person) and a run's steps. TypedDicts, because they are
stored as JSON and sent on the wire as they are (the keys stay camelCase for that)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from app.kinds import CardKind, CardStatus


class Card(TypedDict):
    """`meta["card"]` of a card row: what the tool showed, plus who asked and where it is."""

    kind: str  # a CardKind
    tool: str
    toolUseId: str
    status: CardStatus
    title: NotRequired[str]
    answer: NotRequired[dict[str, Any]]
    # A confirmation: the held call's exact arguments, and whether the approved call ran.
    arguments: NotRequired[dict[str, Any]]
    reason: NotRequired[str]
    executed: NotRequired[bool]


class Step(TypedDict):
    """One tool call of a run, as its steps summary shows it."""

    tool: str
    label: str
    ms: int
    ok: bool
    outputId: NotRequired[int]
    assetId: NotRequired[int]


class StepsSummary(TypedDict):
    """`meta["steps"]` of the run's first shown row."""

    runId: int
    ms: int
    items: list[Step]


def is_confirmation(card: Any) -> bool:
    return isinstance(card, dict) and card.get("kind") == CardKind.CONFIRMATION


def same_value(a: Any, b: Any) -> bool:
    """Strict equality, as the tools check answers: True is not 1, "6" is not 6."""
    return type(a) is type(b) and a == b


def option_json(value: Any) -> str:
    """How an option's value is written into the form (and read back)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _label_for(step: dict[str, Any], value: Any) -> str:
    for opt in step.get("options") or []:
        if same_value(opt.get("value"), value):
            return str(opt.get("label", ""))
    return value if isinstance(value, str) else option_json(value)


def _answer_labels(step: dict[str, Any], value: Any) -> list[str]:
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, list):
        return [_label_for(step, item) for item in value]
    if step.get("input") == "text":
        return [str(value)]
    return [_label_for(step, value)]


def card_summary(card: Mapping[str, Any]) -> list[dict[str, Any]]:
    """How a card reads once answered: each step's question and the labels chosen."""
    steps = card.get("steps") or []
    answer = card.get("answer") or {}
    if not isinstance(answer, dict) or not steps:
        return []
    result_key = card.get("resultKey")
    if result_key is None:
        given = answer.get("answers")
        answers: dict[str, Any] = given if isinstance(given, dict) else {}
        return [
            {
                "title": step.get("title", ""),
                "answers": _answer_labels(step, answers.get(step["id"])),
            }
            for step in steps
        ]
    only = steps[0]
    free_key = card.get("freeTextKey")
    if free_key and free_key in answer:
        labels = [str(answer[free_key])]
    else:
        labels = _answer_labels(only, answer.get(result_key))
    return [{"title": only.get("title", ""), "answers": labels}]
