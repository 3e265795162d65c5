"""The presets' JSON shapes (app/web/presets_api.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from app.chat.preset_models import (
    INSTRUCTIONS_MAX_CHARS,
    MODEL_MAX_CHARS,
    NAME_MAX_CHARS,
    STARTER_MAX_CHARS,
    STARTERS_MAX,
)
from app.web.shapes import Body

Starter = Annotated[str, Field(max_length=STARTER_MAX_CHARS)]
GroupKey = Annotated[str, Field(max_length=40)]


class PresetPatch(Body):
    """Any of these; a field left out keeps its value. A null is refused by each type."""

    name: str = Field(None, max_length=NAME_MAX_CHARS)  # type: ignore[assignment]
    instructions: str = Field(  # type: ignore[assignment]
        None,
        max_length=INSTRUCTIONS_MAX_CHARS,
        description="Added to the system prompt as your own, below the house's rules",
    )
    model: str = Field(  # type: ignore[assignment]
        None, max_length=MODEL_MAX_CHARS, description="A model's name; empty: the default"
    )
    tool_groups: list[GroupKey] = Field(
        None,  # type: ignore[arg-type]
        max_length=20,
        description="The keys of the tool groups that are on",
    )
    starters: list[Starter] = Field(
        None,  # type: ignore[arg-type]
        max_length=STARTERS_MAX,
        description="Short prompts an empty chat offers",
    )


class PresetBody(PresetPatch):
    name: str = Field(max_length=NAME_MAX_CHARS)
    shared: bool = Field(False, description="For everyone (admins only)")


class ToolGroupOut(BaseModel):
    key: str
    label: str
    description: str


class PresetOut(BaseModel):
    id: int
    name: str
    shared: bool = Field(description="The admin's, for everyone (only admins change it)")
    instructions: str
    model: str = Field(description="A model's name; empty: the default model")
    tool_groups: list[str]
    starters: list[str]
    updated_at: str


class PresetsOut(BaseModel):
    presets: list[PresetOut] = Field(description="Your own, then those for everyone")
    tool_groups: list[ToolGroupOut] = Field(description="The tool groups a preset may turn on")
