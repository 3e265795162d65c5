"""`flask` commands (CONTRACT.md)."""

from __future__ import annotations

import click
from flask import Flask, current_app
from flask.cli import with_appcontext
from sqlalchemy import select
from werkzeug.serving import run_simple

from app.accounts.models import ApiToken, User
from app.accounts.service import AccountError, create_user
from app.workspace.demo import DEMO_EMAIL, DEMO_PASSWORD, seed_demo


def _session():
    return current_app.extensions["database"].session()


@click.command("create-user")
@with_appcontext
@click.argument("email")
@click.option("--admin", is_flag=True, help="Make the account an administrator.")
@click.option("--password", prompt=True, hide_input=True, confirmation_prompt=True)
def create_user_command(email: str, admin: bool, password: str) -> None:
    """Create an account."""
    with _session() as session:
        try:
            user = create_user(session, email, password, is_admin=admin)
        except AccountError as error:
            raise click.ClickException(str(error)) from error
        session.commit()
        click.echo(f"Created {user.email}{' (admin)' if admin else ''}.")


@click.command("create-token")
@with_appcontext
@click.argument("email")
@click.option("--name", default="cli", show_default=True)
def create_token_command(email: str, name: str) -> None:
    """Print a new bearer token for EMAIL (shown once, stored hashed)."""
    with _session() as session:
        user = session.scalar(select(User).where(User.email == User.normalize_email(email)))
        if user is None:
            raise click.ClickException(f"No account for {email}.")
        token, raw = ApiToken.issue(user, name)
        session.add(token)
        session.commit()
        click.echo(raw)


@click.command("seed-demo")
@with_appcontext
def seed_demo_command() -> None:
    """Create the demo admin and workspace on an empty database."""
    with _session() as session:
        user, created = seed_demo(session)
        session.commit()
    if created:
        click.echo("Created the demo account and workspace.")
    if user is not None:
        click.echo(f"Log in as {DEMO_EMAIL} with password {DEMO_PASSWORD}")


@click.command("serve")
@with_appcontext
def serve_command() -> None:
    """Serve with Flask's threaded server on HOST:PORT (the embedded default)."""
    settings = current_app.config["LOOPDESK"]
    click.echo(f"Loopdesk is running on http://{settings.host}:{settings.port}")
    click.echo(f"Demo login (if you did not change it): {DEMO_EMAIL} / {DEMO_PASSWORD}")
    if settings.uses_demo_model:
        click.echo("No model configured: replies come from the built-in demo model.")
    # Flask refuses app.run() inside a CLI command; run_simple is what it would call.
    run_simple(settings.host, settings.port, current_app._get_current_object(), threaded=True)


def register_commands(app: Flask) -> None:
    for command in (create_user_command, create_token_command, seed_demo_command, serve_command):
        app.cli.add_command(command)
