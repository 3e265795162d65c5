"""Rate-limit counters kept in memory (no Redis): a window counts its hits and starts over
once it ends, and the counters of people who stopped coming are dropped."""

from __future__ import annotations

from limits import parse
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter

from app.web import limit_storage


class Clock:
    def __init__(self, now: float):
        self.now = now

    def time(self) -> float:
        return self.now


def _limiter(monkeypatch):
    clock = Clock(1_000_000.0)
    monkeypatch.setattr(limit_storage, "time", clock)  # the module's `time.time()`
    storage = storage_from_string("loopdesk-memory://")
    return FixedWindowRateLimiter(storage), storage, clock


def test_a_window_refuses_past_its_limit_and_starts_over_when_it_ends(monkeypatch):
    limiter, _storage, clock = _limiter(monkeypatch)
    limit = parse("2 per minute")

    assert [limiter.hit(limit, "ada") for _ in range(3)] == [True, True, False]
    assert limiter.hit(limit, "bob")  # each key has its own window
    assert limiter.get_window_stats(limit, "ada").reset_time == clock.now + 60

    clock.now += 61
    assert limiter.hit(limit, "ada")
    assert limiter.get_window_stats(limit, "ada").remaining == 1


def test_counters_of_ended_windows_are_dropped(monkeypatch):
    limiter, storage, clock = _limiter(monkeypatch)
    limit = parse("5 per minute")
    for person in range(100):
        limiter.hit(limit, f"person-{person}")

    clock.now += limit_storage.SWEEP_SECONDS + 1
    limiter.hit(limit, "ada")

    assert storage.reset() == 1  # only ada's window is still counted
