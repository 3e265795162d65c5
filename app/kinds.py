"""What a message row, a card and a shown output are, as stored and sent on the wire.

At the bottom layer because the tools and agents build rows and cards while app.chat,
which keeps them, sits above those layers. A StrEnum is its str: rows store these values
and the templates compare against them."""

from __future__ import annotations

from enum import StrEnum


class RowKind(StrEnum):
    """What a message row is (its `kind` column)."""

    USER = "user"  # what the person typed
    HOST = "host"  # the host model's text (and its tool calls, in meta blocks)
    TOOL_RESULT = "tool_result"  # hidden: a tool's answer, as the model reads it
    CARD = "card"  # a question card or a confirmation (meta "card")
    AGENT_OUTPUT = "agent_output"  # an agent's output or a made image (meta "agentOutput")
    ERROR = "error"  # the run failed; the person is told why
    NOTICE = "notice"  # a note about the chat itself (stopped, compacted)


class CardKind(StrEnum):
    QUESTIONNAIRE = "questionnaire"  # questions the person answers (app/tools/questionnaire.py)
    CONFIRMATION = "confirmation"  # a held write or fetch the person approves or declines


class CardStatus(StrEnum):
    AWAITING = "awaiting"
    ANSWERED = "answered"
    DISMISSED = "dismissed"


class OutputKind(StrEnum):
    """`agentOutput.kind` of an agent_output row; an agent's saved output has none."""

    IMAGE = "image"  # a made image, shown from its asset (app/tools/images.py)
