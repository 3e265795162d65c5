"""The heaviest paths a person can take on `make run`, driven over HTTP as a browser would:
a long reply streamed to a page's socket as live Markdown, a 150-page PDF read, search,
and downloads of a large account's data. tests/test_blocking.py asserts that none holds
the worker's loop; bench/stall.py measures how long another person waits meanwhile."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from pathlib import Path

import requests
from sqlalchemy import create_engine, select

from app.accounts.models import User
from app.workspace.models import Attachment
from tests.fake_model import FakeModelServer, Turn, text, tool_use
from tests.live import connect_socket
from tests.waiting import scaled
from tests.web.test_attachments import make_pdf

DEMO_EMAIL = "demo@loopdesk.local"
LAST_SECTION = "Section 49"


def long_markdown_reply() -> str:
    """About 12 KB (within a reply's max_tokens) of the Markdown a long answer has: headings, lists, emphasis, code,
    links and tables, every piece of which the live renderer redoes as the text grows."""
    return "\n\n".join(
        f"## Section {n}\n\n"
        f"- **Point {n}**: a line with `inline code` and [a link](https://example.com/{n})\n"
        f"- *Another point* with ~~struck~~ text\n\n"
        f"| week | reach | clicks |\n|---|---|---|\n| {n} | {n * 120} | {n * 7} |\n\n"
        "```python\nprint('hello')\n```"
        for n in range(50)
    )


def attach_files_directly(instance: Path, count: int, size: int) -> None:
    """The demo account's files, written straight into make run's database: a large
    account's data to download (uploading them is not the path under test)."""
    engine = create_engine(f"sqlite:///{instance / 'loopdesk.db'}")
    try:
        with engine.begin() as connection:
            user_id = connection.scalar(select(User.id).where(User.email == DEMO_EMAIL))
            connection.execute(
                Attachment.__table__.insert(),
                [
                    {
                        "user_id": user_id,
                        "filename": f"scan-{n}.pdf",
                        "content_type": "application/pdf",
                        "size": size,
                        "data": random.Random(n).randbytes(size),  # as compressed as scans are
                        "text": "",
                        "after_sequence": 0,
                    }
                    for n in range(count)
                ],
            )
    finally:
        engine.dispose()


def new_chat(url: str, browser: requests.Session, token: dict[str, str]) -> int:
    return browser.post(f"{url}/api/chats", json={}, headers=token, timeout=10).json()["id"]


def upload_a_pdf(url, browser, token, chat, pages: int) -> None:
    pdf = long_report_pdf(pages)
    uploaded = browser.post(
        f"{url}/api/chats/{chat}/attachments",
        files={"file": ("report.pdf", pdf, "application/pdf")},
        headers=token,
        timeout=60,
    )
    assert uploaded.status_code == 201, uploaded.text


def stream_a_reply_to_an_html_socket(
    url, browser, token, chat, message: str = "Write my plan", timeout: float = 120
) -> str:
    """Send a message with a page's socket open (and its hello sent), read every frame the page would swap in
    until the run ends, and return the frames' text."""
    cookie = "; ".join(f"{name}={value}" for name, value in browser.cookies.items())
    socket = connect_socket(
        f"{url.replace('http://', 'ws://')}/ws/chats/{chat}", headers={"Cookie": cookie}
    )
    frames: list[str] = []
    try:
        # As the page does: it says which rows it holds as soon as it connects.
        rows = browser.get(f"{url}/api/chats/{chat}/messages", timeout=10).json()["messages"]
        socket.send(json.dumps({"after": max((row["sequence"] for row in rows), default=0)}))
        started = browser.post(
            f"{url}/api/chats/{chat}/loop", json={"message": message}, headers=token
        )
        assert started.status_code == 202, started.text
        run = f"{url}/api/runs/{started.json()['runId']}"
        deadline = time.monotonic() + scaled(timeout)
        while browser.get(run, timeout=10).json()["status"] in {"queued", "running"}:
            assert time.monotonic() < deadline, "the run did not end"
            frames += _frames_until_quiet(socket, 0.2)
        frames += _frames_until_quiet(socket, 1.0)  # the rows written as the run ended
    finally:
        socket.close()
    return "".join(frames)


def _frames_until_quiet(socket, quiet: float) -> list[str]:
    frames = []
    while (frame := socket.receive(timeout=quiet)) is not None:
        frames.append(frame if isinstance(frame, str) else frame.decode())
    return frames


def search(url, browser, words: str) -> None:
    found = browser.get(f"{url}/api/search", params={"q": words}, timeout=30)
    assert found.status_code == 200 and found.json()["hits"], found.text


class Download(threading.Thread):
    """GET /settings/data.zip, read to its end, in a thread of its own."""

    def __init__(self, url, browser):
        super().__init__(daemon=True)
        self.url, self.browser, self.size = url, browser, 0
        self.start()

    def run(self):
        with self.browser.get(f"{self.url}/settings/data.zip", stream=True, timeout=120) as got:
            assert got.status_code == 200, got.text
            self.size = sum(len(chunk) for chunk in got.iter_content(64 * 1024))


def download(url, browser) -> int:
    one = Download(url, browser)
    one.join(timeout=120)
    return one.size


READS_PER_ANSWER = 10
READER_WINDOW = 40_000
READER_ANSWER = "Here is what every page of the report says."
READ_THE_REPORT = "Read the report and summarize it"


def long_report_pdf(pages: int = 150) -> bytes:
    """A report whose extracted text is larger than read_attachment's 50,000 characters."""
    line = "Quarterly figures: reach, clicks and sales by channel and week. "
    return make_pdf(*(f"Page {n}. " + line * 30 for n in range(pages)))


class LoadModel(FakeModelServer):
    """A model with a small window, knowing only what each request says. Asked to read the
    report, it reads the attached file READS_PER_ANSWER times (the file's id comes from
    the request's attachment note), then answers: one turn whose tool results are three
    windows large. Asked anything else, it streams the long Markdown reply token by token.
    Forced calls (titles) get an instance of their schema, summaries a short line."""

    def __init__(self) -> None:
        # Strict: forced tool calls (titles) are answered from their schema, beside the
        # runs, without this responder's state.
        super().__init__(context_window=READER_WINDOW, strict=True)
        self.reads = 0
        self.responder = self._respond
        self._reply = long_markdown_reply()

    def settings(self) -> dict[str, str]:
        """make run's environment for the real SDK path to this model."""
        return {
            "MODEL_PROVIDER": "anthropic",
            "ANTHROPIC_API_KEY": "sk-ant-test-make-run",
            "ANTHROPIC_BASE_URL": self.base_url,
            "CONTEXT_WINDOW_TOKENS": str(READER_WINDOW),
        }

    def _respond(self, body: dict) -> Turn:
        tools = {tool.get("name") for tool in body.get("tools") or []}
        if "read_attachment" not in tools:
            return Turn(text("Report reading"))  # a summary
        last = body["messages"][-1]["content"]
        if isinstance(last, str) or not any(b.get("type") == "tool_result" for b in last):
            if READ_THE_REPORT not in json.dumps(last):
                return Turn(text(self._reply), token_delay=0.001)
            self.reads = 0
        found = re.search(r"attachment id (\d+)", json.dumps(body["messages"]))
        if found is None or self.reads >= READS_PER_ANSWER:
            return Turn(text(READER_ANSWER))
        self.reads += 1
        return Turn(tool_use("read_attachment", {"attachment_id": int(found.group(1))}))
