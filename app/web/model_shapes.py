"""The models' JSON shapes (app/web/models_api.py), declared as app/web/shapes.py declares
the rest: each body both parses the request and is its schema. The bounds that depend on
one another (a thinking budget within its window's allowance) are the rules' in
app/chat/offered_models.py, answered as 400 `MODEL_REFUSED`."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field

from app.chat.offered_models import (
    LABEL_MAX_CHARS,
    MAX_CREDITS,
    MAX_WINDOW,
    MIN_WINDOW,
    NAME_MAX_CHARS,
    NAME_PATTERN,
)
from app.web.shapes import NOT_BLANK, Body, _integral

ModelName = Annotated[
    str,
    Field(
        max_length=NAME_MAX_CHARS,
        pattern=NAME_PATTERN.replace("$", "(?![\\s\\S])"),
        description="What the model server calls it",
    ),
]
Label = Annotated[
    str,
    Field(
        min_length=1,
        max_length=LABEL_MAX_CHARS,
        pattern=NOT_BLANK,
        description="What people read in the picker",
    ),
]
Credits = Annotated[
    int,
    Field(ge=0, le=MAX_CREDITS, description="Credits per run; null: MODEL_CREDIT_WEIGHTS'"),
    BeforeValidator(_integral),
]
Window = Annotated[
    int,
    Field(ge=MIN_WINDOW, le=MAX_WINDOW, description="Its window; null: CONTEXT_WINDOW_TOKENS"),
    BeforeValidator(_integral),
]
Thinking = Annotated[
    int,
    Field(
        ge=0,
        le=MAX_WINDOW,
        description="0 (off), or 1024 up to half the window less 8,192; null: THINKING_BUDGET",
    ),
    BeforeValidator(_integral),
]


class ModelBody(Body):
    name: ModelName
    label: Label
    credits: Credits | None = None
    window: Window | None = None
    thinking_budget: Thinking | None = None
    default: bool = Field(False, description="Make it the default")


class ModelPatch(Body):
    """Any of these; a field left out keeps its value, null sets a number back to the
    operator's setting."""

    label: Label = Field(None)  # type: ignore[assignment]
    credits: Credits | None = None
    window: Window | None = None
    thinking_budget: Thinking | None = None
    default: bool = Field(None, description="true: make it the default")  # type: ignore[assignment]


class ModelOut(BaseModel):
    name: str
    label: str
    credits: int = Field(description="Credits a run costs before its billable tool calls")
    window: int = Field(description="Its context window in tokens")
    thinking_budget: int = Field(description="Extended thinking's budget; 0: off")
    default: bool = Field(description="What a chat that picked none answers with")


class ModelsOut(BaseModel):
    models: list[ModelOut]
