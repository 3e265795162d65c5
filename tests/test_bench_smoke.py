"""The benchmark harness runs: inserts and turn_start, quick, on SQLite only."""

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


def test_turn_start_benchmark_quick_on_sqlite(tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--only",
            "turn_start",
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
    assert "turn start p50 ms" in completed.stdout
    assert "floor p50 ms" in completed.stdout

    result = json.loads((tmp_path / "turn_start.json").read_text())
    assert result["quick"] is True
    assert list(result["databases"]) == ["sqlite"]
    cases = result["cases"]
    assert [case["rows"] for case in cases] == [50, 2_000]
    for case in cases:
        assert case["database"] == "sqlite"
        assert case["turn_start_p50_ms"] > 0
        assert case["turn_start_p99_ms"] >= case["turn_start_p50_ms"]
        assert case["floor_p50_ms"] > 0
        assert case["ratio_to_floor"] > 0
        assert case["ratio_to_small"] > 0
        assert case["tail_rows"] > 0
    assert set(result["checks"]) == {"sqlite"}


def test_relay_benchmark_quick(tmp_path):
    """Three processes (stamped model, `flask serve`, the socket readers): every token of
    both levels arrives, through the server and straight from the model."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--only",
            "relay",
            "--quick",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "relay p99 ms" in completed.stdout

    result = json.loads((tmp_path / "relay.json").read_text())
    assert result["quick"] is True
    cases = result["cases"]
    assert [case["streams"] for case in cases] == [1, 5]
    for case in cases:
        for part in (case["relay"], case["floor"]):
            assert part["errors"] == {}
            assert part["completed"] == case["streams"]
            assert part["tokens_delivered"] == part["tokens_expected"]
            assert part["tokens_expected"] == case["streams"] * result["tokens_per_stream"]
            assert 0 < part["p50_ms"] <= part["p99_ms"]
        assert case["relay"]["server_cpu_ms_per_1k_tokens"] > 0
