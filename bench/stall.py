"""How long another person waits on `make run` while the heaviest paths run (issue 29).

`make run` serves everyone from one gevent worker, so anything that holds its loop makes
everyone on it wait. This starts `make run` (its own database, the real SDK to
tests/make_run_load.py's fake model, whose window is small), warms it once, then, phase by
phase, drives the heaviest paths a person can take over HTTP as a browser would while a
bystander (another person, logged out) asks for the login page every 50 ms:

- `idle`: nothing else (the floor);
- `long reply`: a 12 KB Markdown reply streamed to a page's socket, rendered live;
- `reading turn`: one turn that reads a 150-page report ten times, its tool results three
  windows large, fitted to the window (app/chat/fitting.py);
- `PDF + search`: a 150-page PDF read at upload, then search;
- `downloads`: two downloads at once of a 35 MB account;
- `all at once`: every one of them together, the worst case.

Each phase reports the bystander's p50, p99 and worst answer time; the budget line is the
worst answer within 1 s in every phase. The blocks of the loop over 100 ms that make run's
monitor logged (loop_watch.py) are counted too.
"""

from __future__ import annotations

import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import requests

from tests.make_run_load import (
    READ_THE_REPORT,
    Download,
    LoadModel,
    attach_files_directly,
    new_chat,
    search,
    stream_a_reply_to_an_html_socket,
    upload_a_pdf,
)
from tests.test_make_run import demo_login, started_make_run

NAME = "stall"
BUDGET_MS = 1_000
ASK_EVERY = 0.05
BLOCKED = "the event loop was blocked for over 100 ms"


class Bystander(threading.Thread):
    """Another person: GET /login every ASK_EVERY seconds, each answer's time kept."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.seconds = url, []
        self._done = threading.Event()
        self._browser = requests.Session()
        self.start()

    def run(self) -> None:
        while not self._done.is_set():
            began = time.perf_counter()
            answered = self._browser.get(f"{self.url}/login", timeout=30)
            answered.raise_for_status()
            self.seconds.append(time.perf_counter() - began)
            self._done.wait(ASK_EVERY)

    def finish(self) -> list[float]:
        self._done.set()
        self.join(timeout=35)
        return self.seconds


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _phase(name: str, url: str, work: list[Callable[[], object]]) -> dict:
    bystander = Bystander(url)
    began = time.perf_counter()
    threads = [threading.Thread(target=each, daemon=True) for each in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    if not work:
        time.sleep(3)  # the floor: the bystander alone for a while
    seconds = bystander.finish()
    return {
        "phase": name,
        "seconds": round(time.perf_counter() - began, 2),
        "requests": len(seconds),
        "p50_ms": round(statistics.median(seconds) * 1000, 1),
        "p99_ms": round(_percentile(seconds, 0.99) * 1000, 1),
        "max_ms": round(max(seconds) * 1000, 1),
    }


def _paths(url: str, browser, token) -> dict[str, Callable[[], object]]:
    """Each heavy path as a callable, in a chat of its own."""
    reply_chat, reading_chat, pdf_chat = (new_chat(url, browser, token) for _ in range(3))

    def reading_turn():
        upload_a_pdf(url, browser, token, reading_chat, pages=150)
        stream_a_reply_to_an_html_socket(url, browser, token, reading_chat, READ_THE_REPORT)

    def pdf_and_search():
        upload_a_pdf(url, browser, token, pdf_chat, pages=150)
        search(url, browser, "reach clicks")

    def downloads():
        for each in [Download(url, browser) for _ in range(2)]:
            each.join(timeout=120)

    return {
        "long reply": lambda: stream_a_reply_to_an_html_socket(url, browser, token, reply_chat),
        "reading turn": reading_turn,
        "PDF + search": pdf_and_search,
        "downloads": downloads,
    }


def run(*, quick: bool = False, **_options) -> dict:
    result = {
        "name": NAME,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": quick,
        "python": platform.python_version(),
        "budget_ms": BUDGET_MS,
    }
    with tempfile.TemporaryDirectory(prefix="loopdesk-bench-stall-") as name:
        directory = Path(name)
        log = directory / "make-run.log"
        with LoadModel() as model, started_make_run(directory, model.settings()) as url:
            browser, token = demo_login(url)
            warm = new_chat(url, browser, token)
            upload_a_pdf(url, browser, token, warm, pages=2)
            stream_a_reply_to_an_html_socket(url, browser, token, warm)
            attach_files_directly(directory / "instance", count=7, size=5_000_000)
            warmed_up = log.stat().st_size
            phases = [_phase("idle", url, [])]
            for phase, path in _paths(url, browser, token).items():
                phases.append(_phase(phase, url, [path]))
            if not quick:
                phases.append(
                    _phase("all at once", url, list(_paths(url, browser, token).values()))
                )
        result["phases"] = phases
        result["blocks_logged"] = log.read_text()[warmed_up:].count(BLOCKED)
    return result


def budget_line(result: dict) -> dict:
    from bench.report import _line

    budget = (
        "Another person answered within 1 s on `make run` while the heaviest paths run (issue 29)"
    )
    if not result:
        return _line(budget, [], [], "stall not measured")
    misses, measured = [], []
    for phase in result["phases"]:
        text = f"{phase['phase']}: worst {phase['max_ms']:.0f} ms (p99 {phase['p99_ms']:.0f})"
        (misses if phase["max_ms"] > result["budget_ms"] else measured).append(text)
    measured.append(f"{result['blocks_logged']} blocks over 100 ms logged")
    return _line(budget, misses, measured)


def format_table(result: dict) -> str:
    from bench.report import table

    rows = [
        [
            phase["phase"],
            f"{phase['seconds']:.1f}",
            str(phase["requests"]),
            f"{phase['p50_ms']:.0f}",
            f"{phase['p99_ms']:.0f}",
            f"{phase['max_ms']:.0f}",
        ]
        for phase in result["phases"]
    ]
    header = ["while", "s", "bystander requests", "p50 ms", "p99 ms", "worst ms"]
    return (
        table(header, rows)
        + f"\n\nblocks of the loop over 100 ms logged after warm-up: {result['blocks_logged']}"
    )
