"""The benchmark harness runs: inserts, quick, on SQLite only."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_inserts_benchmark_quick_on_sqlite(tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--only",
            "inserts",
            "--quick",
            "--databases",
            "sqlite",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "central path rows/s" in completed.stdout
    assert "plain insert rows/s" in completed.stdout

    result = json.loads((tmp_path / "inserts.json").read_text())
    assert result["quick"] is True
    assert list(result["databases"]) == ["sqlite"]
    cases = result["cases"]
    assert [case["writers"] for case in cases] == [1, 8]
    for case in cases:
        assert case["database"] == "sqlite"
        assert case["rows"] == case["writers"] * result["rows_per_writer"]
        assert case["central_rows_per_s"] > 0
        assert case["plain_rows_per_s"] > 0
        assert case["ratio"] > 0
        assert case["sequence_check"] == "passed"
