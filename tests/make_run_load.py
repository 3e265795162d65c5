"""The heaviest paths a person can take on `make run`, driven over HTTP as a browser would:
a long reply streamed to a page's socket as live Markdown, a 150-page PDF read, search,
and downloads of a large account's data. tests/test_blocking.py asserts that none holds
the worker's loop; bench/stall.py measures how long another person waits meanwhile."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import requests
import simple_websocket
from sqlalchemy import create_engine, select

from app.accounts.models import User
from app.workspace.models import Attachment
from tests.fake_model import FakeModelServer, Turn, text
from tests.web.test_attachments import make_pdf

DEMO_EMAIL = "demo@loopdesk.local"
LAST_SECTION = "Section 79"


def long_markdown_reply() -> str:
    """About 20 KB of the Markdown a long answer has: headings, lists, emphasis, code,
    links and tables, every piece of which the live renderer redoes as the text grows."""
    return "\n\n".join(
        f"## Section {n}\n\n"
        f"- **Point {n}**: a line with `inline code` and [a link](https://example.com/{n})\n"
        f"- *Another point* with ~~struck~~ text\n\n"
        f"| week | reach | clicks |\n|---|---|---|\n| {n} | {n * 120} | {n * 7} |\n\n"
        "```python\nprint('hello')\n```"
        for n in range(80)
    )


def long_reply_model() -> FakeModelServer:
    """A fake model (a context manager that serves while open) that answers every call
    with the long reply, streamed token by token as the API does."""
    model = FakeModelServer()
    reply = long_markdown_reply()
    model.responder = lambda body: Turn(text(reply), token_delay=0.001)
    return model


def model_settings(model: FakeModelServer) -> dict[str, str]:
    """make run's environment for the real SDK path to `model`."""
    return {
        "MODEL_PROVIDER": "anthropic",
        "ANTHROPIC_API_KEY": "sk-ant-test-make-run",
        "ANTHROPIC_BASE_URL": model.base_url,
    }


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
    pdf = make_pdf(*(f"Page {n}: quarterly figures" for n in range(pages)))
    uploaded = browser.post(
        f"{url}/api/chats/{chat}/attachments",
        files={"file": ("report.pdf", pdf, "application/pdf")},
        headers=token,
        timeout=60,
    )
    assert uploaded.status_code == 201, uploaded.text


def stream_a_reply_to_an_html_socket(url, browser, token, chat, timeout: float = 120) -> str:
    """Send a message with a page's socket open, read every frame the page would swap in
    until the run ends, and return the frames' text."""
    cookie = "; ".join(f"{name}={value}" for name, value in browser.cookies.items())
    socket = simple_websocket.Client.connect(
        f"{url.replace('http://', 'ws://')}/ws/chats/{chat}", headers={"Cookie": cookie}
    )
    frames: list[str] = []
    try:
        started = browser.post(
            f"{url}/api/chats/{chat}/loop", json={"message": "Write my plan"}, headers=token
        )
        assert started.status_code == 202, started.text
        run = f"{url}/api/runs/{started.json()['runId']}"
        deadline = time.monotonic() + timeout
        while browser.get(run, timeout=10).json()["status"] in {"queued", "running"}:
            assert time.monotonic() < deadline, "the run did not end"
            while (frame := socket.receive(timeout=0.2)) is not None:
                frames.append(frame if isinstance(frame, str) else frame.decode())
    finally:
        socket.close()
    return "".join(frames)


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
