"""Reading a row's meta in chat: the typed view of a Message's `meta` (its shapes, kind by
kind, are app/row_meta.py's, below the tools that build them), and how a card reads: a
question or a confirmation waiting for the person, and its answer's summary."""

from __future__ import annotations

import json
from typing import Any, cast

from app.chat.models import Message
from app.kinds import CardKind
from app.row_meta import Card, RowMeta, card_in


def meta_of(row: Message) -> RowMeta:
    """The row's meta as its kinds keep it (app/row_meta.py)."""
    return cast(RowMeta, row.meta)


def card_of(row: Message | None) -> Card | None:
    """The card a row keeps (a card row's), or None."""
    return None if row is None else card_in(row.meta)


def is_confirmation(card: Card | None) -> bool:
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


def card_summary(card: Card) -> list[dict[str, Any]]:
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
