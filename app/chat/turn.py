"""A turn as a type: what a person did to start a run, from the request that said it to
the run that answers it. The web layer parses its request bodies and forms into one of
these; `submit_turn` is the one place that tells them apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.chat.run_services import RunServices
from app.chat.turns import (
    StartedTurn,
    submit_edit,
    submit_message,
    submit_regenerate,
    submit_tool_response,
)


@dataclass(frozen=True)
class NewMessage:
    """A message typed (or a starter's prompt): `untrusted` names what its words were
    written from when that is not the person (app/chat/taint.py)."""

    text: str
    untrusted: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class CardAnswer:
    """The answer to the card the run waits on."""

    tool_use_id: str
    result: dict[str, Any]


@dataclass(frozen=True)
class Regenerate:
    """A new answer beside the one ending at `sequence` (any row of that answer)."""

    sequence: int


@dataclass(frozen=True)
class Edit:
    """A new version of the person's message at `sequence`, answered anew."""

    sequence: int
    text: str
    untrusted: list[dict[str, Any]] = field(default_factory=list)


Turn = NewMessage | CardAnswer | Regenerate | Edit
# Turns that show another branch (every tab re-renders it) rather than add rows to this one.
BRANCHING = (Regenerate, Edit)


def submit_turn(
    session: Session, services: RunServices, conversation_id: int, user_id: int, turn: Turn
) -> StartedTurn:
    """Record the turn and its run in the caller's transaction (TurnRejected when it
    cannot start)."""
    settings = services.settings
    match turn:
        case NewMessage(text, untrusted):
            return submit_message(session, settings, conversation_id, user_id, text, untrusted)
        case CardAnswer(tool_use_id, result):
            return submit_tool_response(
                session, services, conversation_id, user_id, tool_use_id, result
            )
        case Regenerate(sequence):
            return submit_regenerate(session, settings, conversation_id, user_id, sequence)
        case Edit(sequence, text, untrusted):
            return submit_edit(
                session, settings, conversation_id, user_id, sequence, text, untrusted
            )
