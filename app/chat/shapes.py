"""The shapes kept in a row's meta and read in several places of chat: a card (a question
or a confirmation waiting for the person) and a run's steps. TypedDicts, because they are
stored as JSON and sent on the wire as they are (the keys stay camelCase for that)."""

from __future__ import annotations

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
