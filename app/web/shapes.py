"""What the JSON API takes and answers, declared once: each response model both serializes
the response (`dump`) and is the response's schema in the OpenAPI document
(app/web/openapi.py); each `Body` both parses a request body and is its schema."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    RootModel,
    Tag,
    ValidationInfo,
    create_model,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.agents.guidelines import MAX_RULES
from app.agents.models import RULE_MAX_CHARS
from app.error_codes import ErrorCode
from app.memory.store import MAX_FACT_CHARS, MAX_FACTS, MAX_INPUT_CHARS, MAX_INSTRUCTIONS_CHARS

# Times are UTC, written with a Z (as everywhere else in the API).
UtcTime = Annotated[
    datetime, PlainSerializer(lambda value: value.isoformat() + "Z", return_type=str)
]


class Shape(BaseModel):
    # Read from a row (its other columns ignored); the answer has exactly these fields.
    model_config = ConfigDict(
        from_attributes=True, json_schema_extra={"additionalProperties": False}
    )

    @classmethod
    def dump(cls, item: Any) -> dict:
        return cls.model_validate(item).model_dump(mode="json")


class OfferOut(Shape):
    id: int
    name: str
    description: str
    audience: str
    price: str
    brand_colors: list[str]
    created_at: UtcTime
    updated_at: UtcTime


class PersonaOut(Shape):
    id: int
    name: str
    offer_id: int | None
    description: str
    pains: str
    goals: str
    created_at: UtcTime
    updated_at: UtcTime


class OutputOut(Shape):
    id: int
    agent: str
    title: str
    offer_id: int | None
    conversation_id: int | None
    content: dict[str, Any]
    created_at: UtcTime
    untrusted_sources: list[Any] | None = Field(
        None, description="The untrusted content (pages, attachments) it was made from"
    )


class AssetOut(Shape):
    id: int
    kind: str
    title: str
    prompt: str
    preset: str
    content_type: str
    offer_id: int | None
    image_url: str = Field(description="The image (or placeholder artwork) itself")
    created_at: UtcTime
    untrusted_sources: list[Any] | None = Field(
        None, description="The untrusted content (pages, attachments) it was made from"
    )


class CharacterOut(Shape):
    id: int
    name: str
    description: str
    persona_id: int | None
    portrait_asset_id: int | None
    created_at: UtcTime
    untrusted_sources: list[Any] | None = Field(
        None, description="The untrusted content (pages, attachments) it was made from"
    )


class CampaignOut(Shape):
    id: int
    name: str
    status: str
    offer_id: int | None
    briefing: dict[str, Any]
    created_at: UtcTime
    updated_at: UtcTime
    untrusted_sources: list[Any] | None = Field(
        None, description="The untrusted content (pages, attachments) it was made from"
    )


def page_of(item: type[Shape]) -> type[BaseModel]:
    """A list answer: one page of items, and the cursor of the next (null: the last)."""
    return create_model(
        item.__name__.removesuffix("Out") + "Page",
        __config__=ConfigDict(extra="forbid"),
        items=(list[item], ...),  # type: ignore[valid-type]  # a model made at run time
        next_cursor=(str | None, ...),
    )


class ErrorBody(BaseModel):
    code: ErrorCode
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorBody


# -- chats, runs, memory, guidelines, attachments, search --------------------------------


class Loose(BaseModel):
    """A shape whose answers may carry more fields than the ones named."""

    model_config = ConfigDict(extra="allow")


class Body(BaseModel):
    """A request body: parsed by this model (app/web/api.py `body_of`) and documented by
    it, so the two cannot disagree. Unknown fields and loose types are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, regex_engine="python-re")


def _blank_class() -> str:
    """Python's whitespace (what str.strip takes away), as a regex class every dialect
    reads alike: `\\s` differs between Python, ECMA-262 and Rust (U+001C..U+001F, U+FEFF)."""
    spaces = [code for code in range(0x3001) if chr(code).isspace()]
    runs: list[list[int]] = []
    for code in spaces:
        if runs and code == runs[-1][1] + 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(
        f"\\u{first:04x}" + (f"-\\u{last:04x}" if last != first else "") for first, last in runs
    )


# Some text that is not only whitespace: a regex found anywhere in the string.
NOT_BLANK = f"[^{_blank_class()}]"


def _max_message_chars() -> int:
    from flask import current_app

    return current_app.extensions["services"].settings.max_message_chars


def _within_message_limit(value: str, info: ValidationInfo) -> str:
    limit = (info.context or {}).get("max_chars") or _max_message_chars()
    if len(value) > limit:
        raise PydanticCustomError("too_large", "longer than {limit} characters", {"limit": limit})
    return value.strip()


# A person's text: not blank, at most MAX_MESSAGE_CHARS (a setting: 413 over it).
MessageText = Annotated[
    str,
    Field(
        pattern=NOT_BLANK,
        json_schema_extra=lambda schema: schema.update(maxLength=_max_message_chars()),
    ),
    AfterValidator(_within_message_limit),
]


def _integral(value: Any) -> Any:
    """JSON Schema's integer takes 2.0 as 2; so does every body."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WholeNumber = Annotated[int, BeforeValidator(_integral)]
# A row's sequence.
Sequence = Annotated[int, Field(gt=0, lt=10**15), BeforeValidator(_integral)]


# Ids are INTEGER columns on PostgreSQL (app/web/openapi.py's MAX_ID).
ID_MAX = 2**31 - 1


ProjectId = Annotated[int, Field(ge=1, le=ID_MAX), BeforeValidator(_integral)]


class ChatCreate(Body):
    title: str | None = Field(None, max_length=120)
    project_id: ProjectId | None = Field(
        None, description="A project of yours (default: your personal one)"
    )
    preset_id: ProjectId | None = Field(
        None, description="Start it from a preset of yours or one for everyone"
    )


class ChatCreated(BaseModel):
    id: int


class ChatOut(BaseModel):
    id: int
    title: str
    status: str
    updated_at: str
    pinned: bool = Field(description="Shown first in the sidebar")
    archived: bool = Field(description="Out of the list (still searchable); restorable")
    folder: str | None = Field(description="The folder it is in (of its project); null: none")
    project_id: int = Field(description="The project it works in")
    model: str | None = Field(
        description="The model it picked (GET /api/models); null: the default's. A pick no"
        " longer offered answers with the default"
    )
    unread: bool = Field(
        description="A reply ended (or waits on a card) since you last looked at the chat"
    )
    preset_id: int | None = Field(
        description="The preset it was started from; null: none (or it was deleted)"
    )


class ChatList(BaseModel):
    chats: list[ChatOut]
    folders: list[str] | None = Field(
        None,
        description="With project_id only: your folders in that project (archived chats'"
        " too), alphabetical",
    )


class RowOut(Loose):
    id: int
    sequence: int
    parent: int | None
    siblings: list[int]
    role: str
    kind: str
    content: str
    created_at: str
    card: dict[str, Any] | None = None
    agentOutput: dict[str, Any] | None = None  # noqa: N815 (the wire's name)
    summary: str | None = None
    stopped: bool | None = None
    steps: dict[str, Any] | None = None
    untrusted_sources: list[Any] | None = Field(
        None, description="On a person's message: the untrusted content its text came from"
    )


class ChatExport(BaseModel):
    """`?format=json`: the chat, its shown rows and its attachments."""

    chat: dict[str, Any]
    messages: list[dict[str, Any]]
    attachments: list[dict[str, Any]]


class MessageList(BaseModel):
    messages: list[RowOut]


class ToolResponse(Body):
    toolUseId: str = Field(min_length=1, max_length=200)  # noqa: N815
    result: dict[str, Any] = Field(description="At most MAX_MESSAGE_CHARS as JSON (413)")

    @model_validator(mode="after")
    def _small_enough(self, info: ValidationInfo):
        limit = (info.context or {}).get("max_chars") or _max_message_chars()
        if len(json.dumps(self.result)) > limit:
            raise PydanticCustomError("too_large", "'result' is too large", {})
        return self


class EditBody(Body):
    sequence: Sequence
    message: MessageText


class NewMessage(Body):
    """Send a message."""

    message: MessageText
    when: Literal["after", "now"] | None = Field(
        None,
        description="While a reply is being written: 'after' queues the message (202 "
        "queued), 'now' stops the reply where it is and sends the message (steer). Left "
        "out: 409 RUN_IN_FLIGHT while a reply is being written",
    )


class CardAnswer(Body):
    """Answer a card (the toolUseId of its row's card)."""

    toolResponse: ToolResponse  # noqa: N815


class Regenerate(Body):
    """Write the reply to a host row again."""

    regenerate: Sequence


class Edit(Body):
    """Send an edited version of a person's row."""

    edit: EditBody


LOOP_KINDS = {"message": "message", "toolResponse": "card", "regenerate": "regenerate"}
LOOP_KINDS["edit"] = "edit"


def _loop_kind(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    keys = [key for key in value if key != "when" or "message" not in value]
    return LOOP_KINDS.get(keys[0]) if len(keys) == 1 else None


class LoopBody(RootModel):
    """Exactly one of the four."""

    root: Annotated[
        Annotated[NewMessage, Tag("message")]
        | Annotated[CardAnswer, Tag("card")]
        | Annotated[Regenerate, Tag("regenerate")]
        | Annotated[Edit, Tag("edit")],
        Discriminator(
            _loop_kind,
            custom_error_type=ErrorCode.INVALID_BODY,
            custom_error_message="Send one of 'message', 'toolResponse', 'regenerate' or 'edit'.",
        ),
    ]


class QueuedOut(BaseModel):
    id: int
    message: str
    created_at: str


class QueueOut(BaseModel):
    queue: list[QueuedOut] = Field(description="Oldest (sent next) first")


class RunStarted(BaseModel):
    runId: int | None = Field(  # noqa: N815
        description="The run that answers; null when the message was queued"
    )
    queued: bool | None = Field(None, description='True: kept in the queue ("when": "after")')
    queuedMessage: QueuedOut | None = None  # noqa: N815


class BranchBody(Body):
    sequence: Sequence


class BranchOut(BaseModel):
    messages: list[RowOut]
    leaf: int | None
    branch: str


class Stopped(BaseModel):
    stopped: bool
    runId: int | None  # noqa: N815


class RunOut(BaseModel):
    id: int
    status: str
    iterations: int
    error: str | None = None


class MemoryBody(Body):
    """Either or both; a field left out (or null) keeps its value."""

    instructions: str | None = Field(None, max_length=MAX_INSTRUCTIONS_CHARS)
    memories: list[Annotated[str, Field(max_length=MAX_FACT_CHARS)]] | None = Field(
        None, max_length=MAX_FACTS, description="The exact list of facts"
    )


class MemoryText(Body):
    text: str = Field(pattern=NOT_BLANK, max_length=MAX_INPUT_CHARS)


class MemoryOut(Loose):
    instructions: str
    memories: list[str]


class RuleIn(Body):
    id: WholeNumber | None = Field(None, description="A rule kept (and edited); none: a new rule")
    text: str = Field(pattern=NOT_BLANK, max_length=RULE_MAX_CHARS)
    enabled: bool | None = None
    position: WholeNumber | None = Field(None, description="Echoed back from GET; ignored")


class RulesBody(Body):
    rules: list[RuleIn] = Field(max_length=MAX_RULES)


class RuleOut(BaseModel):
    id: int
    text: str
    enabled: bool
    position: int


class RulesOut(BaseModel):
    rules: list[RuleOut]


class AttachmentOut(BaseModel):
    id: int
    filename: str
    content_type: str
    size: int


class SearchChat(BaseModel):
    id: int
    title: str


class SearchHit(BaseModel):
    chat: SearchChat
    sequence: int | None
    kind: str | None
    snippet: str
    highlights: list[list[int]]
    at: str
    url: str


class SearchChatHits(BaseModel):
    """One chat of a page of hits: its rows' sequences, best first, as `hits` lists them."""

    chat: SearchChat
    url: str
    title_matched: bool
    archived: bool = Field(description="Out of the chat list (still yours, restorable)")
    sequences: list[int]


class SearchOut(BaseModel):
    hits: list[SearchHit]  # each chat's hits together, in the order of `chats`
    chats: list[SearchChatHits]
    next_cursor: str | None
