"""docs/reference.md, written from the code: every setting (the fields of
app/config.py's Settings, and gunicorn.conf.py's), every route of the URL map and every
`flask` command, each with what it is for (its summary in the OpenAPI declaration, else the
first line of its docstring). `flask reference` rewrites the file; a test keeps the
committed one equal to what the code says, so the list cannot fall behind.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import click
from flask import Flask
from pydantic.fields import FieldInfo

from app.config import PROJECT_ROOT, Settings

REFERENCE = PROJECT_ROOT / "docs" / "reference.md"
HEADER = """# Reference: every setting, route and command

Written by `flask --app wsgi reference` from the code (`app/reference.py`); a test fails
when it differs from what the code says. What the routes take and answer, and the socket
frames are in [CONTRACT.md](CONTRACT.md); the JSON API's shapes in `/api/openapi.json`.
"""


@dataclass(frozen=True)
class Documented:
    """One environment variable as the settings table lists it."""

    env: str
    meaning: str
    default_text: str


def _documented(env: str, settings_field: FieldInfo) -> Documented:
    meaning = settings_field.description or ""
    extra = settings_field.json_schema_extra
    if isinstance(extra, dict) and "default_text" in extra:
        return Documented(env, meaning, str(extra["default_text"]))
    value = settings_field.get_default(call_default_factory=True)
    if value is None or value == "" or value == () or value == {}:
        return Documented(env, meaning, "unset")
    shown = str(value).lower() if isinstance(value, bool) else value
    return Documented(env, meaning, f"`{shown}`")


# Read by gunicorn.conf.py, not by load_settings.
_GUNICORN = "`gunicorn.conf.py`"
GUNICORN_SETTINGS = (
    Documented("GUNICORN_BIND", _GUNICORN, "`HOST:PORT`"),
    Documented("GUNICORN_WORKER_CLASS", _GUNICORN, "`gevent`"),
    Documented("WEB_CONCURRENCY", _GUNICORN, "`2`"),
    Documented("GUNICORN_WORKER_CONNECTIONS", _GUNICORN, "`1000`"),
    Documented("GUNICORN_THREADS", _GUNICORN, "`64`"),
    Documented("GUNICORN_ACCESS_LOG", _GUNICORN, "off"),
)

# Every variable `load_settings` (the fields of Settings read from the environment) and
# gunicorn.conf.py read; a test runs load_settings on a recording environment and fails
# on one that is missing here.
DOCUMENTED_SETTINGS: tuple[Documented, ...] = (
    *(
        _documented(settings_field.validation_alias, settings_field)
        for settings_field in Settings.model_fields.values()
        if isinstance(settings_field.validation_alias, str)
    ),
    *GUNICORN_SETTINGS,
)


def render_reference(app: Flask) -> str:
    lines = [HEADER, *_settings_table(), "", "## Routes", "", "| method | path | what it is for |"]
    lines.append("|---|---|---|")
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: (r.rule, sorted(r.methods or ()))):
        if rule.endpoint == "static":
            continue
        view = app.view_functions[rule.endpoint]
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            summary = _summary(view, method)
            lines.append(f"| {method} | `{rule.rule}` | {summary} |")
    lines += ["", "## Commands", "", "| command | what it does |", "|---|---|"]
    for name, command in sorted(app.cli.commands.items()):
        if name in {"routes", "shell", "run"}:
            continue  # Flask's own
        lines.append(f"| `flask {name}` | {_first_line(command.help or '')} |")
    return "\n".join(lines) + "\n"


def _settings_table() -> list[str]:
    lines = [
        "## Settings",
        "",
        "Read from the environment (and `.env` when present) by `app/config.py`.",
        "",
        "| name | default | meaning |",
        "|---|---|---|",
    ]
    for setting in DOCUMENTED_SETTINGS:
        lines.append(f"| `{setting.env}` | {setting.default_text} | {setting.meaning} |")
    return lines


def _summary(view, method: str) -> str:
    declared = getattr(view, "openapi", {}).get(method)
    if declared is not None:
        return declared.summary
    return _first_line(inspect.getdoc(view) or "")


def _first_line(text: str) -> str:
    """The docstring's first sentence, joined onto one line."""
    paragraph = text.strip().split("\n\n")[0]
    return " ".join(paragraph.split()).replace("|", "\\|")


@click.command("reference")
def reference_command() -> None:
    """Rewrite docs/reference.md (every route and command) from the code."""
    from flask import current_app

    REFERENCE.write_text(render_reference(current_app))
    click.echo(f"wrote {REFERENCE.relative_to(PROJECT_ROOT)}")
