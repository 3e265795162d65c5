"""Which model a chat answers with, and with what window, thinking budget and credits: the
one place that says so (the request builder, metering, the header's picker and the API ask
here).

With no model listed (app/chat/offered_models.py) the operator's model is the one and the
default: HOST_MODEL (or the built-in demo model when no model server is configured) with
CONTEXT_WINDOW_TOKENS, THINKING_BUDGET and MODEL_CREDIT_WEIGHTS, as before models could be
listed. Without a model server the demo model stays one of the choices. A chat that chose
a model no longer offered answers with the default, and says so (`fallback_notice`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.billing.meter import model_weight
from app.chat.models import Conversation
from app.chat.offered_models import OfferedModel, listed_models
from app.config import Settings

DEMO_LABEL = "Demo model"


@dataclass(frozen=True)
class ChosenModel:
    """A model as a chat answers with it: every number resolved (the row's, else the
    operator's setting). `credits`: what a run costs before its billable tool calls."""

    name: str
    label: str
    window: int
    thinking_budget: int
    credits: int
    default: bool = False


def _from_row(settings: Settings, row: OfferedModel) -> ChosenModel:
    return ChosenModel(
        name=row.name,
        label=row.label,
        window=row.window_tokens or settings.context_window_tokens,
        thinking_budget=(
            settings.thinking_budget if row.thinking_budget is None else row.thinking_budget
        ),
        credits=model_weight(settings, row.name) if row.credits is None else row.credits,
        default=row.is_default,
    )


def operator_model(settings: Settings, default: bool = True) -> ChosenModel:
    """The model the operator's settings name (the demo model without a model server)."""
    name = settings.host_model_name
    return ChosenModel(
        name=name,
        label=DEMO_LABEL if settings.uses_demo_model else name,
        window=settings.context_window_tokens,
        thinking_budget=settings.thinking_budget,
        credits=model_weight(settings, name),
        default=default,
    )


def offered_models(session: Session, settings: Settings) -> list[ChosenModel]:
    """What a person may pick, in order, exactly one the default."""
    choices = [_from_row(settings, row) for row in listed_models(session)]
    names = {choice.name for choice in choices}
    if (not choices or settings.uses_demo_model) and settings.host_model_name not in names:
        has_default = any(choice.default for choice in choices)
        choices.insert(0, operator_model(settings, default=not has_default))
    if not any(choice.default for choice in choices):
        choices[0] = replace(choices[0], default=True)
    return choices


def default_of(choices: list[ChosenModel]) -> ChosenModel:
    return next(choice for choice in choices if choice.default)


def model_named(choices: list[ChosenModel], name: str | None) -> ChosenModel | None:
    return next((choice for choice in choices if choice.name == name), None)


def chosen_model(session: Session, settings: Settings, conversation: Conversation) -> ChosenModel:
    """The model the chat answers with: its choice while offered, else the default."""
    choices = offered_models(session, settings)
    return model_named(choices, conversation.model) or default_of(choices)


def chosen_model_of(session: Session, settings: Settings, conversation_id: int) -> ChosenModel:
    """`chosen_model` for a chat known by its id (a chat gone: the default)."""
    choice = session.scalar(select(Conversation.model).where(Conversation.id == conversation_id))
    choices = offered_models(session, settings)
    return model_named(choices, choice) or default_of(choices)


def fallback_notice(choices: list[ChosenModel], choice: str | None) -> str | None:
    """What the chat's header says when its model is no longer offered, else None."""
    if choice is None or model_named(choices, choice) is not None:
        return None
    return f"{choice} is no longer offered; answering with {default_of(choices).label}."
