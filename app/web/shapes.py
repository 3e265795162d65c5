"""What the JSON API answers, declared once: each model both serializes the response
(`dump`) and is the response's schema in the OpenAPI document (app/web/openapi.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, create_model

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
        items=(list[item], ...),
        next_cursor=(str | None, ...),
    )


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorBody


# -- chats, runs, memory, guidelines, attachments, search (bodies validated by hand in
# app/web/api.py and memory_api.py; these are their documented shapes) --------------------


class Loose(BaseModel):
    """A shape whose answers may carry more fields than the ones named."""

    model_config = ConfigDict(extra="allow")


class ChatCreate(BaseModel):
    title: str | None = Field(None, max_length=120)


class ChatCreated(BaseModel):
    id: int


class ChatOut(BaseModel):
    id: int
    title: str
    status: str
    updated_at: str


class ChatList(BaseModel):
    chats: list[ChatOut]


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


class MessageList(BaseModel):
    messages: list[RowOut]


class ToolResponse(BaseModel):
    toolUseId: str  # noqa: N815
    result: dict[str, Any]


class EditBody(BaseModel):
    sequence: int
    message: str


class LoopBody(BaseModel):
    """Exactly one of the four."""

    model_config = ConfigDict(extra="forbid")
    message: str | None = None
    toolResponse: ToolResponse | None = None  # noqa: N815
    regenerate: int | None = None
    edit: EditBody | None = None


class RunStarted(BaseModel):
    runId: int  # noqa: N815


class BranchBody(BaseModel):
    sequence: int


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


class MemoryBody(BaseModel):
    instructions: str | None = None
    memories: list[str] | None = None


class MemoryText(BaseModel):
    text: str


class MemoryOut(Loose):
    instructions: str
    memories: list[str]


class RuleIn(BaseModel):
    id: int | None = None
    text: str
    enabled: bool | None = None
    position: int | None = None


class RulesBody(BaseModel):
    rules: list[RuleIn]


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
    sequences: list[int]


class SearchOut(BaseModel):
    hits: list[SearchHit]  # each chat's hits together, in the order of `chats`
    chats: list[SearchChatHits]
    next_cursor: str | None
