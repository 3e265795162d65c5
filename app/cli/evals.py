"""`flask eval`: run the eval datasets against the configured model (docs/evals.md).

pydantic-evals is the optional `evals` extra: nothing here imports it (or the loop) until
the command runs, so the app starts without it."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
import yaml
from flask import current_app
from flask.cli import with_appcontext

from app.config import PROJECT_ROOT

DATASETS = PROJECT_ROOT / "evals"
MISSING = "flask eval needs pydantic-evals: install the evals extra: make extras"


def shipped_datasets() -> list[Path]:
    return sorted(DATASETS.glob("*.yaml"))


def _default_directory() -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path(current_app.instance_path) / "evals" / stamp


@click.command("eval")
@with_appcontext
@click.argument("datasets", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs of each case; a case's pass rate is over its runs.",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=0.8,
    show_default=True,
    help="Exit 1 when fewer than this share of all runs pass.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML report (default: report.html in the eval's directory).",
)
@click.option(
    "--transcripts",
    type=click.Path(file_okay=False, path_type=Path),
    help="The eval's directory: transcripts, report and its own database "
    "(default: instance/evals/<time>/).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Cases run at once (each in its own chat).",
)
@click.option("--judge-model", help="The model that grades rubrics (default: HOST_MODEL).")
def eval_command(
    datasets: tuple[Path, ...],
    repeat: int,
    threshold: float,
    out: Path | None,
    transcripts: Path | None,
    concurrency: int,
    judge_model: str | None,
) -> None:
    """Run eval DATASETs (default: every evals/*.yaml) through the real loop against the
    configured model; print the results, write the report and every transcript."""
    if importlib.util.find_spec("pydantic_evals") is None:
        raise click.ClickException(MISSING)
    from app.evals.report import summary_lines, write_html
    from app.evals.runner import eval_services, load_dataset, run_eval

    settings = current_app.config["LOOPDESK"]
    if settings.uses_demo_model:
        raise click.ClickException(
            "flask eval measures a model: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL); "
            "the built-in demo model is not one."
        )
    paths = list(datasets) or shipped_datasets()
    for path in paths:
        try:
            load_dataset(path)
        except (ValueError, yaml.YAMLError) as invalid:
            raise click.ClickException(f"{path}: {invalid}") from invalid
    directory = transcripts or _default_directory()
    services = eval_services(settings, directory)
    try:
        result = run_eval(
            services,
            paths,
            directory,
            repeat=repeat,
            concurrency=concurrency,
            judge_model=judge_model,
            progress=sys.stdout.isatty(),
        )
    finally:
        services.close()
    for table in result.tables:
        click.echo(table)
    for line in summary_lines(result, threshold):
        click.echo(line)
    report = out or directory / "report.html"
    write_html(result, report, threshold=threshold, model=settings.host_model_name)
    click.echo(f"Report: {report}")
    click.echo(f"Transcripts: {directory / 'transcripts'}")
    if result.pass_rate < threshold:
        raise SystemExit(1)
