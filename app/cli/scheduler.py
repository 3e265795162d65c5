"""`flask scheduler`: the process that sends scheduled messages when the web processes do
not (SCHEDULER=apart), and `start_in_process` for the serving entries that do."""

from __future__ import annotations

import contextlib

import click
from flask import Flask, current_app
from flask.cli import with_appcontext

from app.chat.scheduler import PASS_SECONDS, Scheduler, SchedulerParts, run_due


def scheduler_parts(app: Flask) -> SchedulerParts:
    services = app.extensions["services"]
    return SchedulerParts(
        database=services.database,
        hub=services.hub,
        executor=app.extensions["executor"],
        settings=services.settings,
    )


def start_in_process(app: Flask) -> Scheduler | None:
    """The serving process's scheduler (`make run`, `flask serve`, each gunicorn worker),
    unless SCHEDULER=apart leaves it to `flask scheduler`."""
    if app.config["LOOPDESK"].scheduler != "web":
        return None
    return Scheduler(scheduler_parts(app)).start()


@click.command("scheduler")
@with_appcontext
@click.option("--once", is_flag=True, help="One pass, then exit once its runs are handed over.")
@click.option(
    "--every",
    type=click.FloatRange(min=1),
    default=PASS_SECONDS,
    show_default=True,
    help="Seconds between passes.",
)
def scheduler_command(once: bool, every: float) -> None:
    """Send scheduled messages that are due, every few seconds until stopped (one process
    is enough; more are safe: a database claim sends each tick once)."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    parts = scheduler_parts(app)
    if once:
        report = run_due(parts)
        # A thread executor's runs finish before the process ends; Dramatiq's are queued.
        app.extensions["executor"].shutdown()
        click.echo(
            f"{len(report.sent)} sent, {len(report.waiting)} waiting for a reply to end, "
            f"{len(report.skipped)} skipped."
        )
        return
    click.echo(f"Sending scheduled messages every {every:g} s (Ctrl+C stops).")
    with contextlib.suppress(KeyboardInterrupt):
        Scheduler(parts, every).loop()
