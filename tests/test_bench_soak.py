"""The soak's verdict (bench/soak/judge.py) on recorded samples: what an operator reading
`make soak`'s answer relies on. No soak runs here (that is `make soak`, half an hour)."""

import argparse
from pathlib import Path

from bench.soak import judge
from bench.soak.run import model_lifetime, write_docs

MIB = 1024 * 1024
START, END = 0.0, 600.0  # ten minutes: windows of two


def requests(last_ms: float, errors: int = 0) -> list[dict]:
    made = [
        {"at": at, "kind": "POST", "name": "/api/chats", "ms": 40.0, "error": ""}
        for at in range(0, 120, 1)
    ]
    made += [
        {"at": at, "kind": "POST", "name": "/api/chats", "ms": last_ms, "error": ""}
        for at in range(480, 600, 1)
    ]
    made += [{"at": 300.0, "kind": "WS", "name": "join", "ms": 0.0, "error": "closed"}] * errors
    return made


def readings(rss_end: float, fds_end: int, connections_end: int) -> list[dict]:
    made = []
    for at in range(0, 601, 5):
        late = at >= 480
        made.append(
            {
                "at": float(at),
                "process": "web",
                "rss": (rss_end if late else 100) * MIB,
                "fds": fds_end if late else 30,
                "connections": connections_end if late else 3,
            }
        )
    return made


def test_a_flat_run_passes_and_each_kind_of_drift_fails_it():
    assert judge.verdict(requests(45), readings(105, 30, 3), START, END, clients=4)["flat"]
    assert not judge.verdict(requests(45, errors=1), readings(100, 30, 3), START, END)["flat"]
    slower = judge.verdict(requests(400), readings(100, 30, 3), START, END)
    assert not slower["flat"]
    assert slower["latency"]["all requests"]["p99_ms"] == [40.0, 400.0]
    grown = judge.verdict(requests(45), readings(115, 30, 3), START, END)
    assert not grown["resources"]["web"]["rss"]["flat"]
    leaking = judge.verdict(requests(45), readings(100, 300, 9), START, END, clients=4)
    assert not leaking["resources"]["web"]["fds"]["flat"]
    assert not leaking["resources"]["web"]["connections"]["flat"]


def test_the_soak_section_replaces_its_old_self_in_the_benchmarks_document(tmp_path: Path):
    setup = {
        "label": "make run",
        "log": {"tracebacks": 0},
        "load_average_1m": [1.0, 1.2],
        "verdict": judge.verdict(requests(45), readings(100, 30, 3), START, END),
    }
    soak = {
        "started_at": "2026-12-05 13:00 UTC",
        "minutes": 10,
        "locust": "2.47.0",
        "http_users": 8,
        "socket_users": 4,
        "http_rate": 0.5,
        "socket_rate": 0.25,
        "setups": {"make-run": setup, "scaled": {"skipped": "Redis unreachable"}},
    }
    document = tmp_path / "benchmarks.md"
    document.write_text("# Benchmarks\n\n## Soak\n\nold figures\n\n## Relay\n\nkept\n")
    write_docs(soak, document)
    written = document.read_text()
    assert "old figures" not in written and "## Relay\n\nkept" in written
    assert "A shortened run (10 minutes" in written and "Verdict: **flat**" in written
    assert "Skipped: Redis unreachable" in written
    assert "at the same time" not in written
    write_docs({**soak, "concurrently": True}, document)
    assert "The setups ran at the same time" in document.read_text()


def test_the_model_outlives_every_setups_soak():
    # The stamped model exits by itself; the soak's model must outlast both setups.
    both = argparse.Namespace(minutes=30.0, setup=["make-run", "scaled"])
    one = argparse.Namespace(minutes=30.0, setup=["make-run"])
    assert model_lifetime(both) > 2 * 30 * 60
    assert model_lifetime(one) > 30 * 60
