"""In a real browser: a message refused for the allowance (402) or the concurrent-run cap
(429) shows its reason in the page's banner and keeps the draft; nothing fails silently."""

from __future__ import annotations

import threading

import pytest

from tests.browser.helpers import log_in, new_chat, send_message
from tests.factories import set_allowance
from tests.fake_model import Turn, text

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture
def live_app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, max_concurrent_runs=1)


def test_over_the_allowance_the_banner_says_so(page, live_server, live_app, person):
    log_in(page, live_server)
    new_chat(page, live_server)
    set_allowance(live_app, person[2], 0)

    send_message(page, "Write me a quiz")

    banner = page.wait_for_selector("#banner.banner-shown")
    assert "monthly allowance" in banner.inner_text()
    assert page.input_value("#composer-input") == "Write me a quiz"
    assert page.locator("#rows .row").count() == 0


def test_past_the_run_cap_the_banner_says_so(page, live_server, person, fake_model):
    release = threading.Event()

    def slow(_body):
        release.wait(20)
        return Turn(text("Done."))

    fake_model.responder = slow
    try:
        log_in(page, live_server)
        new_chat(page, live_server)
        send_message(page, "A long job")
        fake_model.wait_for_requests(1)
        new_chat(page, live_server)

        send_message(page, "Another job")

        banner = page.wait_for_selector("#banner.banner-shown")
        assert "being written in other chats" in banner.inner_text()
        assert page.input_value("#composer-input") == "Another job"
    finally:
        release.set()
