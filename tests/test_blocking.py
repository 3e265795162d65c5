"""Nothing one person does stalls everyone: `make run` serves everyone from one gevent
worker with gevent's blocking monitor on (loop_watch.py), and the heaviest paths (a long
reply from the model, through the real SDK, streamed as live Markdown to the HTML socket;
a 150-page PDF read and a turn that reads it until its tool results are three
windows large; search; two downloads at once of 35 MB of data) never hold its loop
over 100 ms once warm (tests/make_run_load.py drives them; bench/stall.py times another
person's requests meanwhile)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.make_run_load import (
    LAST_SECTION,
    READ_THE_REPORT,
    READER_ANSWER,
    READS_PER_ANSWER,
    Download,
    LoadModel,
    attach_files_directly,
    download,
    new_chat,
    search,
    stream_a_reply_to_an_html_socket,
    upload_a_pdf,
)
from tests.test_make_run import ROOT, _gevent_works, demo_login, started_make_run

BLOCKED = "the event loop was blocked for over 100 ms"
WATCHING = "blocks of the event loop over 100 ms are logged"


def test_a_block_of_the_loop_is_logged_with_its_stack_and_counted():
    script = (
        "from gevent import monkey; monkey.patch_all()\n"
        "import loop_watch; loop_watch.watch_the_loop()\n"
        "import gevent, time\n"
        "def crunch_for_a_while():\n"
        "    end = time.perf_counter() + 0.6\n"
        "    while time.perf_counter() < end: pass\n"
        "gevent.spawn(crunch_for_a_while).join(); gevent.sleep(0.3)\n"
        "print('reported', loop_watch.reported)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) >= 1
    assert BLOCKED in done.stderr
    assert "in crunch_for_a_while" in done.stderr  # the stack that held the loop


@pytest.mark.skipif(not _gevent_works(), reason="make run serves with gevent only where it works")
@pytest.mark.timeout(300)
def test_the_heaviest_paths_never_hold_make_runs_loop(tmp_path):
    log_path = tmp_path / "make-run.log"
    with LoadModel() as model, started_make_run(tmp_path, model.settings()) as url:
        browser, token = demo_login(url)
        # Once lightly, for what a process does once (template compiles, first queries).
        chat = new_chat(url, browser, token)
        upload_a_pdf(url, browser, token, chat, pages=2)
        first_reply = stream_a_reply_to_an_html_socket(url, browser, token, chat)
        search(url, browser, "Section")
        assert download(url, browser) > 0
        attach_files_directly(tmp_path / "instance", count=7, size=5_000_000)
        warmed_up = log_path.stat().st_size

        chat = new_chat(url, browser, token)
        second_reply = stream_a_reply_to_an_html_socket(url, browser, token, chat)
        upload_a_pdf(url, browser, token, chat, pages=150)
        # One turn whose tool results are three windows large (app/chat/fitting.py).
        reading = stream_a_reply_to_an_html_socket(url, browser, token, chat, READ_THE_REPORT)
        search(url, browser, "reach clicks")
        downloads = [Download(url, browser) for _ in range(2)]
        for each in downloads:
            each.join(timeout=120)
        assert all(each.size > 30_000_000 for each in downloads)
    # The page saw the whole reply rendered, live, both times.
    assert LAST_SECTION in first_reply and LAST_SECTION in second_reply
    assert "<table>" in second_reply
    assert READER_ANSWER in reading and model.rejections == []
    assert model.reads == READS_PER_ANSWER
    log = log_path.read_text()
    assert WATCHING in log
    # The model client is made off the loop (connect_soon), even for the first reply.
    assert "make_anthropic" not in log, log[log.index("make_anthropic") - 3000 :][:6000]
    heavy = log[warmed_up:]
    assert BLOCKED not in heavy, heavy[heavy.index(BLOCKED) :][:6000]
