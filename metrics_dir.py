"""Prometheus' multiprocess mode for a gunicorn start (gunicorn.conf.py, make_run.py):
every process records into files in PROMETHEUS_MULTIPROC_DIR and a scrape sums them.

prometheus_client chooses its mode when it is first imported, so this runs before the app
is: a fresh directory per start when none is given (removed when the server exits); a
given one is emptied, since a previous start's files would be counted again. The
metrics server on METRICS_ADDRESS, unauthenticated, starts once, in gunicorn's master."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
_PREPARED = "LOOPDESK_METRICS_DIR_OF"  # the pid that prepared it (the config is read twice)
_MADE = "LOOPDESK_METRICS_DIR_MADE"


def prepare() -> str:
    """The directory, ready (idempotent within a process and its children)."""
    if os.environ.get(_PREPARED) == str(os.getpid()):
        return os.environ["PROMETHEUS_MULTIPROC_DIR"]
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        os.makedirs(given, exist_ok=True)
        for stale in Path(given).glob("*.db"):
            stale.unlink(missing_ok=True)
    else:
        given = tempfile.mkdtemp(prefix="loopdesk-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = given
        os.environ[_MADE] = given
    os.environ[_PREPARED] = str(os.getpid())
    return given


def remove_made() -> None:
    """The directory this start made, gone with the server."""
    made = os.environ.get(_MADE)
    if made and os.environ.get(_PREPARED) == str(os.getpid()):
        shutil.rmtree(made, ignore_errors=True)


def metrics_address() -> str:
    """METRICS_ADDRESS from the environment or .env (app/config.py checks it, for the app)."""
    address = os.environ.get("METRICS_ADDRESS")
    if address is None:
        from dotenv import dotenv_values

        address = dotenv_values(ROOT / ".env").get("METRICS_ADDRESS")
    return (address or "").strip()


def serve(address: str):
    """prometheus_client's own server on `address` (host:port), in a thread, over every
    process's files (the master imports no app: it serves what the processes record)."""
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    host, _, port = address.rpartition(":")
    server, _thread = start_http_server(int(port), host.strip("[]") or "127.0.0.1", registry)
    return server
