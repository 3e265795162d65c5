"""The models people may pick for a chat, listed by an admin (`flask models ...`, the
Admin → Models page, `/api/admin/models`): one table and the rules every surface shares.

A listed model has a unique name (what the model server calls it), a label people read,
and, each optional, its credits per run (NULL: MODEL_CREDIT_WEIGHTS' weight), its window
(NULL: CONTEXT_WINDOW_TOKENS) and its thinking budget (NULL: THINKING_BUDGET). Exactly one
listed model is the default while any is listed. What a chat answers with is
app/chat/model_choice.py's to say. Every change here is the caller's transaction."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import String, false, func, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.db import NEVER_REUSED_IDS, Base, utcnow

# The answer's own output tokens in every host call; a thinking budget comes on top.
HOST_MAX_TOKENS = 8_192
NAME_MAX_CHARS = 100
LABEL_MAX_CHARS = 80
# What a model server may call a model: claude-sonnet-5-5, openai/gpt-4o, llama3.1:8b.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,99}$"
MIN_WINDOW = 16_384
MAX_WINDOW = 2_000_000
MIN_THINKING = 1_024  # the Messages API's least budget_tokens
MAX_CREDITS = 10_000


class OfferedModel(Base):
    __tablename__ = "offered_models"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_MAX_CHARS), unique=True)
    label: Mapped[str] = mapped_column(String(LABEL_MAX_CHARS))
    credits: Mapped[int | None]
    window_tokens: Mapped[int | None]
    thinking_budget: Mapped[int | None]
    is_default: Mapped[bool] = mapped_column(default=False, server_default=false())
    position: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# Read on every turn: built once (composing it cost more than running it).
_LISTED_MODELS = select(OfferedModel).order_by(OfferedModel.position, OfferedModel.id)


class ModelRefused(ValueError):
    """A change the rules refuse; its message says why, in the admin's words. `field`: the
    input at fault, when one is."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class UnknownModel(ModelRefused):
    """No model of that name is listed."""


class ModelNameTaken(ModelRefused):
    """A model of that name is listed already."""


@dataclass(frozen=True)
class ModelSpec:
    """What an admin says about a model; None leaves a field as it is (on a change) or to
    the operator's setting (on an add)."""

    label: str | None = None
    credits: int | None = None
    window: int | None = None
    thinking_budget: int | None = None


def thinking_allowance(window: int) -> int:
    """The largest thinking budget a window allows: the reserved output (the answer and its
    thinking) may take at most half the window, the rest is the conversation's."""
    return max(0, window // 2 - HOST_MAX_TOKENS)


def check_name(name: str) -> str:
    name = name.strip()
    if not re.fullmatch(NAME_PATTERN, name):
        raise ModelRefused(
            f"A model's name is 1 to {NAME_MAX_CHARS} letters, digits and . _ : / @ -, "
            "starting with a letter or digit.",
            "name",
        )
    return name


def check_label(label: str) -> str:
    if any(unicodedata.category(char) == "Cc" for char in label):
        raise ModelRefused("A label cannot hold control characters.", "label")
    label = label.strip()
    if not label or len(label) > LABEL_MAX_CHARS:
        raise ModelRefused(f"A label is 1 to {LABEL_MAX_CHARS} characters.", "label")
    return label


def check_numbers(
    credits: int | None, window: int | None, thinking_budget: int | None, operator_window: int
) -> None:
    """Credits 0 or more; a window within sane bounds; a thinking budget 0 (off) or from
    1,024 to what the window allows (the model server refuses other budgets)."""
    if credits is not None and not 0 <= credits <= MAX_CREDITS:
        raise ModelRefused(f"Credits per run are 0 to {MAX_CREDITS:,}.", "credits")
    if window is not None and not MIN_WINDOW <= window <= MAX_WINDOW:
        raise ModelRefused(f"A window is {MIN_WINDOW:,} to {MAX_WINDOW:,} tokens.", "window")
    if thinking_budget is None or thinking_budget == 0:
        return
    allowance = thinking_allowance(window or operator_window)
    if thinking_budget < MIN_THINKING or thinking_budget > allowance:
        room = (
            f"from {MIN_THINKING:,} to {allowance:,}"
            if allowance >= MIN_THINKING
            else "not possible"
        )
        raise ModelRefused(
            f"A thinking budget is 0 (off) or {room} for a window of "
            f"{window or operator_window:,} tokens.",
            "thinking_budget",
        )


def listed_models(session: Session) -> list[OfferedModel]:
    """The listed models in their order."""
    return list(session.scalars(_LISTED_MODELS))


def find_model(session: Session, name: str) -> OfferedModel:
    model = session.scalar(select(OfferedModel).where(OfferedModel.name == name.strip()))
    if model is None:
        raise UnknownModel(f"No model named {name.strip()!r} is listed.", "name")
    return model


def add_model(
    session: Session, name: str, spec: ModelSpec, operator_window: int, default: bool = False
) -> OfferedModel:
    """List a model, last in the order; the first one listed is the default."""
    name = check_name(name)
    label = check_label(spec.label if spec.label is not None else name)
    check_numbers(spec.credits, spec.window, spec.thinking_budget, operator_window)
    if session.scalar(select(OfferedModel.id).where(OfferedModel.name == name)) is not None:
        raise ModelNameTaken(f"A model named {name!r} is listed already.", "name")
    last = session.scalar(select(func.max(OfferedModel.position)))
    model = OfferedModel(
        name=name,
        label=label,
        credits=spec.credits,
        window_tokens=spec.window,
        thinking_budget=spec.thinking_budget,
        position=(last or 0) + 1,
    )
    session.add(model)
    session.flush()
    if default or len(listed_models(session)) == 1:
        make_default(session, name)
    return model


def change_model(
    session: Session, name: str, spec: ModelSpec, operator_window: int, cleared: frozenset[str]
) -> OfferedModel:
    """Change what `spec` gives; `cleared` names the fields set back to the operator's
    setting (credits, window, thinking_budget)."""
    model = find_model(session, name)
    credits = (
        None
        if "credits" in cleared
        else spec.credits
        if spec.credits is not None
        else model.credits
    )
    window = (
        None
        if "window" in cleared
        else spec.window
        if spec.window is not None
        else model.window_tokens
    )
    thinking = (
        None
        if "thinking_budget" in cleared
        else spec.thinking_budget
        if spec.thinking_budget is not None
        else model.thinking_budget
    )
    check_numbers(credits, window, thinking, operator_window)
    if spec.label is not None:
        model.label = check_label(spec.label)
    model.credits, model.window_tokens, model.thinking_budget = credits, window, thinking
    session.flush()
    return model


def make_default(session: Session, name: str) -> OfferedModel:
    chosen = find_model(session, name)
    for model in listed_models(session):
        model.is_default = model.id == chosen.id
    session.flush()
    return chosen


def remove_model(session: Session, name: str) -> None:
    """Take a model off the list; the default passes to the first left. Chats that chose
    it answer with the default from then on (app/chat/model_choice.py says so)."""
    model = find_model(session, name)
    was_default = model.is_default
    session.delete(model)
    session.flush()
    left = listed_models(session)
    if was_default and left:
        left[0].is_default = True
        session.flush()
