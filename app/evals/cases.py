"""What a case says, as its YAML `inputs` read: the workspace it starts from, the person's
messages, and how the person answers the cards the host shows (docs/evals.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    # A misspelt key in a dataset is an error when it loads, not a case that quietly
    # tests something else.
    model_config = ConfigDict(extra="forbid")


class PersonaSetup(_Strict):
    name: str
    description: str = ""
    pains: str = ""
    goals: str = ""


class OfferSetup(_Strict):
    name: str
    description: str = ""
    audience: str = ""
    price: str = ""
    brand_colors: list[str] = Field(default_factory=list)
    personas: list[PersonaSetup] = Field(default_factory=list)


class OutputSetup(_Strict):
    """A saved output (an agent's earlier work) the case can refer to by its title."""

    agent: str = Field(description="the agent's slug, e.g. ad-copy")
    title: str
    offer: str | None = Field(default=None, description="the offer's name it was written for")
    content: dict[str, Any]


class AttachmentSetup(_Strict):
    """A text file attached to the chat before the first message: outside content, so it
    taints the conversation when the host reads it (the safety gate's cases)."""

    filename: str
    text: str


class Setup(_Strict):
    offers: list[OfferSetup] = Field(default_factory=list)
    outputs: list[OutputSetup] = Field(default_factory=list)
    memory: list[str] = Field(default_factory=list, description="remembered facts")
    instructions: str = Field(default="", description="the person's own instructions")
    attachments: list[AttachmentSetup] = Field(default_factory=list)
    phase: Literal["discovery", "build"] = "discovery"


class CardReply(_Strict):
    """How the person answers the next card shown, exactly one of:
    `approve` (a confirmation), `choose` (the option whose label contains it), `text`
    (a free-text answer), or `result` (the answer as the API takes it)."""

    approve: bool | None = None
    choose: str | None = None
    text: str | None = None
    result: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> CardReply:
        given = [v for v in (self.approve, self.choose, self.text, self.result) if v is not None]
        if len(given) != 1:
            raise ValueError("a card reply gives exactly one of approve, choose, text, result")
        return self


class EvalInputs(_Strict):
    """A case's inputs: its starting workspace, the messages the person sends (each after
    the previous one's run ended or paused), and the replies to the cards shown, in order.
    A card shown with no reply left stays unanswered: the case ends there, or its next
    message dismisses it, as typing does in the chat."""

    setup: Setup = Field(default_factory=Setup)
    messages: list[str] = Field(min_length=1)
    replies: list[CardReply] = Field(default_factory=list)
