"""The benchmark harness runs quick and on SQLite only, and writes its report: the
database benchmarks in one test, the serving ones (minimal relay and embedded server,
stamped model in its own process) in another, and the one-token turn on `make run` beside the
minimal relay."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_bench(tmp_path: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--databases", "sqlite"]
        + ["--results-dir", str(tmp_path), "--docs-dir", str(tmp_path / "docs"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    return completed


def test_database_benchmarks_quick_on_sqlite_write_the_report(tmp_path):
    completed = run_bench(tmp_path, "--only", "inserts,turn_start,search,startup", timeout=150)
    assert "central path rows/s" in completed.stdout
    assert "turn start p50 ms" in completed.stdout

    inserts = json.loads((tmp_path / "inserts.json").read_text())
    assert list(inserts["databases"]) == ["sqlite"]
    assert [case["writers"] for case in inserts["cases"]] == [1, 8]
    for case in inserts["cases"]:
        assert case["rows"] == case["writers"] * inserts["rows_per_writer"]
        assert case["central_rows_per_s"] > 0 and case["plain_rows_per_s"] > 0
        assert case["sequence_check"] == "passed"

    turn_start = json.loads((tmp_path / "turn_start.json").read_text())
    shapes = [(case["rows"], case["branched"]) for case in turn_start["cases"]]
    assert shapes == [(50, False), (2_000, False), (2_000, True)]
    for case in turn_start["cases"]:
        assert 0 < case["turn_start_p50_ms"] <= case["turn_start_p99_ms"]
        assert case["floor_p50_ms"] > 0 and case["tail_rows"] > 0

    searched = json.loads((tmp_path / "search.json").read_text())
    [case] = searched["cases"]
    assert case["messages"] == 5_000
    assert 0 < case["search_p50_ms"] <= case["search_p99_ms"] and case["lookup_p50_ms"] > 0

    report = (tmp_path / "docs" / "benchmarks.md").read_text()
    for heading in (
        "## Machine",
        "## Budget (issue 10)",
        "## Budget (issue 22)",
        "## Startup",
        "## Turn start",
        "## Search",
        "## Inserts",
    ):
        assert heading in report
    assert "Central insert path within 1.5x of a plain INSERT (sqlite, 8 writers)" in report
    startup = json.loads((tmp_path / "startup.json").read_text())
    assert startup["warm_median_seconds"] > 0 and startup["bare_import_median_seconds"] > 0
    assert "`make run` warm start to first response within 1.5x of one bare import" in report
    assert "Turn start at most 10 ms p50" in report
    assert "turn start at 2,000 branched rows <= 10 ms p99 (sqlite)" in report
    assert "![turn start against conversation length](bench-turn-start.png)" in report
    assert (tmp_path / "docs" / "bench-turn-start.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.timeout(300)
def test_serving_benchmarks_quick_relay_every_token_and_write_the_report(tmp_path):
    """Minimal relay and embedded server: every token of every level arrives on the JSON
    and the htmx socket, and straight from the model; first frame and idle sockets too.
    (About 40 s on a quiet machine; CI's loaded second pass took over 90.)"""
    completed = run_bench(tmp_path, "--only", "serving", timeout=240)
    assert "p99 ratio" in completed.stdout

    result = json.loads((tmp_path / "serving.json").read_text())
    assert {name: entry["status"] for name, entry in result["variants"].items()} == {
        "minimal": "ran",
        "embedded": "ran",
    }
    expected = result["tokens_per_stream"]
    cases = result["floor"] + result["relay"]
    seen = {(case.get("variant", "floor"), case.get("format"), case["streams"]) for case in cases}
    for variant, fmt in (("floor", None), ("minimal", "json"), ("embedded", "json")):
        assert {(variant, fmt, 1), (variant, fmt, 5)} <= seen
    assert {("embedded", "htmx", 1), ("embedded", "htmx", 5)} <= seen
    for case in cases:
        assert case["errors"] == {}, case
        assert case["completed"] == case["streams"]
        assert case["tokens_delivered"] == case["streams"] * expected
        assert 0 < case["p50_ms"] <= case["p99_ms"]
    for case in result["relay"]:
        assert case["server_cpu_ms_per_1k_tokens"] > 0

    (first_frame,) = result["first_frame"]
    assert first_frame["variant"] == "embedded" and first_frame["completed"] == first_frame["turns"]
    assert first_frame["first_frame_p50_ms"] > result["model_first_token"]["p50_ms"] > 0
    for idle in result["idle_sockets"]:
        assert idle["sockets_open"] == idle["sockets_requested"] > 0
        assert idle["server_alive"]

    docs = tmp_path / "docs"
    report = (docs / "benchmarks.md").read_text()
    for heading in ("## Relay", "## First frame", "## Idle sockets", "## Budget (issue 10)"):
        assert heading in report
    assert "minimal relay p99 ms" in report
    assert "First frame at most 25 ms p50 over the model's own time to first token" in report
    for figure in ("bench-relay-latency.png", "bench-relay-cpu.png"):
        assert f"]({figure})" in report
        assert (docs / figure).read_bytes().startswith(PNG_MAGIC)


@pytest.mark.timeout(300)
def test_turn_cost_quick_times_every_turn_on_every_server_and_reports_its_lines(tmp_path):
    """`make run`'s server, the minimal relay and `make run`'s again for a person with a
    long past, one-token turns in turn: every turn ends, and the report has the issue-36
    lines with their ratios."""
    run_bench(tmp_path, "--only", "turn_cost", timeout=240)
    result = json.loads((tmp_path / "turn_cost.json").read_text())
    variants = [case["variant"] for case in result["cases"]]
    assert variants == ["minimal", "make-run", "make-run, crowded"]
    for case in result["cases"]:
        assert case["errors"] == 0 and case["turns"] == result["turns"]
        assert 0 < case["wall_p50_ms"] <= case["wall_p99_ms"]
        assert case["cpu_mean_ms"] > 0
    assert result["wall_ratio"] > 0 and result["cpu_ratio"] > 0
    assert result["crowd"]["chats"] > 0 and result["crowd_wall_ratio"] > 0
    report = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "## One-token turn" in report
    assert "a one-token turn (POST /loop to the end frame)" in report
    assert "earlier chats (each with its run and usage event)" in report
