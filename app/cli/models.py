"""`flask models ...`: the models people may pick for a chat (docs/CONTRACT.md). The rules
are app/chat/offered_models.py's, as for the admin page and the JSON API."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext

from app.chat.model_choice import offered_models
from app.chat.offered_models import (
    ModelRefused,
    ModelSpec,
    add_model,
    make_default,
    remove_model,
)


def _services():
    return current_app.extensions["services"]


@click.group("models")
def models_group() -> None:
    """The models people may pick for a chat (one the default)."""


@models_group.command("add")
@with_appcontext
@click.argument("name")
@click.option("--label", required=True, help="What people read in the picker.")
@click.option(
    "--credits", type=click.IntRange(min=0), help="Credits per run (default: the weight)."
)
@click.option("--window", type=int, help="Its context window in tokens.")
@click.option("--thinking-budget", "thinking_budget", type=int, help="0 (off), or 1024 or more.")
@click.option("--default", "default", is_flag=True, help="Make it the default.")
def add_command(
    name: str,
    label: str,
    credits: int | None,
    window: int | None,
    thinking_budget: int | None,
    default: bool,
) -> None:
    """List a model for people to pick (the first one listed is the default)."""
    services = _services()
    spec = ModelSpec(label, credits, window, thinking_budget)
    with services.database.session() as session:
        try:
            model = add_model(session, name, spec, services.settings.context_window_tokens, default)
        except ModelRefused as refused:
            raise click.ClickException(str(refused)) from refused
        session.commit()
        note = " (the default)" if model.is_default else ""
        click.echo(f"Listed {model.name}: {model.label}{note}.")


@models_group.command("list")
@with_appcontext
def list_command() -> None:
    """The models people may pick, in order; * marks the default."""
    services = _services()
    with services.database.session() as session:
        choices = offered_models(session, services.settings)
    for choice in choices:
        mark = "*" if choice.default else " "
        thinking = (
            f"thinking {choice.thinking_budget:,}" if choice.thinking_budget else "no thinking"
        )
        click.echo(
            f"{mark} {choice.name}  {choice.label}  ({choice.credits} credits a run, window "
            f"{choice.window:,}, {thinking})"
        )


@models_group.command("remove")
@with_appcontext
@click.argument("name")
def remove_command(name: str) -> None:
    """Take a model off the list; chats that chose it answer with the default."""
    with _services().database.session() as session:
        try:
            remove_model(session, name)
        except ModelRefused as refused:
            raise click.ClickException(str(refused)) from refused
        session.commit()
    click.echo(f"Removed {name}.")


@models_group.command("default")
@with_appcontext
@click.argument("name")
def default_command(name: str) -> None:
    """Make a listed model the default."""
    with _services().database.session() as session:
        try:
            make_default(session, name)
        except ModelRefused as refused:
            raise click.ClickException(str(refused)) from refused
        session.commit()
    click.echo(f"{name} is the default.")
