"""Waiting in tests, written once: `eventually(check)` polls until `check()` is true and
gives its value back, or fails naming what never happened and the last value seen.

Every timeout is multiplied by LOOPDESK_TEST_TIME_SCALE (default 1): a slow or loaded
machine sets it to 2 or 3 and every wait stretches alike, with no test edited. A timeout
is the longest a test waits, never how long it waits: a check that holds returns at once.
To show that something did NOT happen, wait for a later event that must come after it (a
frame, a request counted by the fake model), then look; never sleep and look."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

TIME_SCALE_SETTING = "LOOPDESK_TEST_TIME_SCALE"

FIRST_POLL = 0.002  # seconds; doubles after each miss, up to LAST_POLL
LAST_POLL = 0.05


def time_scale(environ=os.environ) -> float:
    """LOOPDESK_TEST_TIME_SCALE as a positive number (1 when unset)."""
    raw = environ.get(TIME_SCALE_SETTING, "").strip()
    if not raw:
        return 1.0
    try:
        scale = float(raw)
    except ValueError:
        scale = 0.0
    if not scale > 0:
        raise ValueError(f"{TIME_SCALE_SETTING} must be a positive number, not {raw!r}")
    return scale


def scaled(seconds: float) -> float:
    """A test's timeout, stretched by LOOPDESK_TEST_TIME_SCALE."""
    return seconds * time_scale()


def eventually(
    check: Callable[[], T],
    timeout: float = 5.0,
    what: str | Callable[[], object] = "the condition",
    *,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """`check()`'s first truthy value, polled from now for up to `timeout` seconds (scaled).

    On timeout: an AssertionError naming `what` (a string, or a callable asked only then,
    for the state worth showing) and `check()`'s last value. `sleep` is how to pause
    between polls (a browser test passes one that lets the page's events run)."""
    scale = time_scale()
    limit = timeout * scale
    deadline = time.monotonic() + limit
    pause = FIRST_POLL
    while True:
        value = check()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            described = what() if callable(what) else what
            raise AssertionError(
                f"{described}: not within {limit:g} s"
                f" ({timeout:g} s × {TIME_SCALE_SETTING}={scale:g}); last value {value!r}"
            )
        sleep(min(pause, left))
        pause = min(pause * 2, LAST_POLL)
