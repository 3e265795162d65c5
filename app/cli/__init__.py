"""`flask` commands (docs/CONTRACT.md)."""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import click
from flask import Flask, current_app
from flask.cli import with_appcontext
from sqlalchemy import select
from werkzeug.serving import run_simple

from app.accounts.models import DEFAULT_SCOPES, SCOPES, ApiToken, User
from app.accounts.service import AccountError, create_user
from app.agents.guidelines import ensure_seeded
from app.chat.feedback import describe_feedback
from app.chat.models import Conversation, Run
from app.chat.run_log import describe, load_reports
from app.chat.stale import StaleSweeper, sweep
from app.cli.evals import eval_command
from app.cli.mcp import mcp_group
from app.cli.models import models_group
from app.cli.scheduler import scheduler_command, start_in_process
from app.config import PROJECT_ROOT
from app.db import utcnow
from app.heap import settle
from app.mcp.checker import McpListChecker
from app.reference import reference_command
from app.workspace.seed import DEMO_EMAIL, DEMO_PASSWORD, seed_demo


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
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(SCOPES),
    help="read, chat or admin (admins only); repeat for more. Default: read and chat.",
)
@click.option("--expires-days", type=click.IntRange(min=1), help="Days it lasts (default: never).")
def create_token_command(
    email: str, name: str, scopes: tuple[str, ...], expires_days: int | None
) -> None:
    """Print a new bearer token for EMAIL (shown once, stored hashed)."""
    with _session() as session:
        user = session.scalar(select(User).where(User.email == User.normalize_email(email)))
        if user is None:
            raise click.ClickException(f"No account for {email}.")
        if "admin" in scopes and not user.is_admin:
            raise click.ClickException(f"{email} is not an admin: no admin scope.")
        expires_at = utcnow() + timedelta(days=expires_days) if expires_days else None
        token, raw = ApiToken.issue(user, name, scopes or DEFAULT_SCOPES, expires_at)
        session.add(token)
        session.commit()
        click.echo(raw)


def _seed_demo() -> None:
    with _session() as session:
        # The shared guidelines too, when the database never had any.
        ensure_seeded(session)
        user, created = seed_demo(session)
        session.commit()
    if created:
        click.echo("Created the demo account and workspace.")
    if user is not None:
        click.echo(f"Log in as {DEMO_EMAIL} with password {DEMO_PASSWORD}")


@click.command("seed-demo")
@with_appcontext
def seed_demo_command() -> None:
    """Create the demo admin and workspace on an empty database."""
    _seed_demo()


def _greet(settings) -> None:
    click.echo(f"Loopdesk is running on http://{settings.host}:{settings.port}")
    click.echo(f"Demo login (if you did not change it): {DEMO_EMAIL} / {DEMO_PASSWORD}")
    if settings.uses_demo_model:
        click.echo("No model configured: replies come from the built-in demo model.")


def serve_metrics(app: Flask):
    """METRICS_ADDRESS: the metrics without authentication, queue depth included, from this
    process (gunicorn's master serves its own: gunicorn.conf.py)."""
    from app.chat.queue import queue_collector
    from app.telemetry.metrics import serve

    address = app.config["LOOPDESK"].metrics_address
    server = serve(address, [queue_collector(app.extensions["services"].database)])
    if server is not None:
        click.echo(f"Prometheus metrics at http://{address}/metrics")
    return server


def serve_threaded(app: Flask) -> None:
    settings = app.config["LOOPDESK"]
    services = app.extensions["services"]
    sweeper = StaleSweeper(services.database, services.hub, settings.stale_seconds).start()
    lists = McpListChecker(
        services.database, services.mcp, services.secrets, services.settings.fetch_allow_hosts
    ).start()
    scheduler = start_in_process(app)
    metrics_server = serve_metrics(app)
    settle()  # what it loaded to serve leaves the collector's full passes (app/heap.py)
    services.model.connect_soon(then=settle)
    try:
        # Flask refuses app.run() inside a CLI command; run_simple is what it would call.
        run_simple(settings.host, settings.port, app, threaded=True)
    finally:
        sweeper.stop()
        lists.stop()
        if scheduler is not None:
            scheduler.stop()
        if metrics_server is not None:
            metrics_server.shutdown()


@click.command("serve")
@with_appcontext
def serve_command() -> None:
    """Serve with Flask's threaded server on HOST:PORT."""
    _greet(current_app.config["LOOPDESK"])
    serve_threaded(current_app._get_current_object())  # type: ignore[attr-defined]


def prepare_and_greet(app: Flask) -> None:
    """What `make run` (make_run.py) does before serving, in its own process: migrations
    and the demo seed, then how to log in."""
    from flask_migrate import upgrade

    with app.app_context():
        upgrade()
        _seed_demo()
    _greet(app.config["LOOPDESK"])


@click.command("worker")
@with_appcontext
@click.option("--threads", type=int, default=None, help="Runs at once (default WORKER_THREADS).")
def worker_command(threads: int | None) -> None:
    """Execute runs from the Redis queue until stopped (RUN_EXECUTOR=dramatiq)."""
    from app.chat.worker import start_worker

    services = current_app.extensions["services"]
    if not services.settings.redis_url:
        raise click.ClickException("`flask worker` needs REDIS_URL (the queue lives in Redis).")
    threads = threads or services.settings.worker_threads
    if services.settings.worker_pool == "gevent":
        # A fresh interpreter that patches before importing anything (gevent_worker.py).
        entry = str(PROJECT_ROOT / "gevent_worker.py")
        os.execv(sys.executable, [sys.executable, entry, str(threads)])
    start_worker(services, threads)


@click.command("sweep-stale")
@with_appcontext
def sweep_stale_command() -> None:
    """Reclaim runs whose heartbeat stopped (STALE_SECONDS): they end as interrupted."""
    services = current_app.extensions["services"]
    reclaimed = sweep(services.database, services.hub, services.settings.stale_seconds)
    for item in reclaimed:
        click.echo(f"run {item.run_id} in conversation {item.conversation_id}: interrupted")
    click.echo(f"{len(reclaimed)} stale run(s) reclaimed.")


@click.command("chat-logs")
@with_appcontext
@click.argument("conversation_id", type=int)
@click.argument("run_id", type=int, required=False)
@click.option("--full", is_flag=True, help="Show tool inputs and outputs as stored.")
def chat_logs_command(conversation_id: int, run_id: int | None, full: bool) -> None:
    """Print the run logs of a conversation (or of one of its runs)."""
    with _session() as session:
        conversation = session.get(Conversation, conversation_id)
        if conversation is None:
            raise click.ClickException(f"No conversation {conversation_id}.")
        run = session.get(Run, run_id) if run_id is not None else None
        if run_id is not None and (run is None or run.conversation_id != conversation_id):
            raise click.ClickException(
                f"Run {run_id} is not a run of conversation {conversation_id}."
            )
        owner = session.get(User, conversation.user_id)
        reports = load_reports(session, conversation_id, run_id)
    click.echo(
        f"Conversation {conversation.id} · {conversation.title!r} · {owner.email} · "
        f"{conversation.status} · {len(reports)} run{'' if len(reports) == 1 else 's'}"
    )
    for report in reports:
        click.echo("")
        click.echo(report.header())
        if not report.entries:
            click.echo("  (no log entries: run logs were off, or the run never got going)")
        for entry in report.entries:
            line = describe(entry, preview_chars=None if full else 160)
            click.echo(f"  {report.offset(entry):>9}  {entry.kind:<11}  {line}")
        for rated in report.feedback:
            click.echo(f"  {'':>9}  {'feedback':<11}  {describe_feedback(rated)}")


def register_commands(app: Flask) -> None:
    for command in (
        create_user_command,
        create_token_command,
        seed_demo_command,
        serve_command,
        worker_command,
        sweep_stale_command,
        chat_logs_command,
        reference_command,
        mcp_group,
        models_group,
        scheduler_command,
        eval_command,
    ):
        app.cli.add_command(command)
