"""What a process pays to import the app: the big packages it may never use are left out
until first use (a `flask db upgrade` or a web process before its first model call)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (and the OpenTelemetry SDK: tracing is off unless OTEL_* turn it on)
DEFERRED = ("anthropic", "pypdf", "dramatiq", "pydantic_evals", "opentelemetry.sdk")


def test_importing_the_app_leaves_the_big_optional_packages_out(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"RUN_EXECUTOR", "REDIS_URL"} and not k.startswith("OTEL_")
    }
    env["INSTANCE_PATH"] = str(tmp_path)
    probe = "import sys, wsgi; print(' '.join(sorted(set(sys.modules) & set(sys.argv[1:]))))"

    loaded = subprocess.run(
        [sys.executable, "-c", probe, *DEFERRED],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()

    assert loaded == []
