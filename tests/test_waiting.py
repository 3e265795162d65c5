"""tests/waiting.py: a wait returns as soon as its check holds, fails naming what never
happened, and stretches with LOOPDESK_TEST_TIME_SCALE."""

import itertools

import pytest

from tests.waiting import TIME_SCALE_SETTING, eventually, time_scale


class FakeClock:
    """time.monotonic and a sleep that only moves it: no test here really waits."""

    def __init__(self, monkeypatch):
        self.now = 0.0
        self.sleeps: list[float] = []
        monkeypatch.setattr("tests.waiting.time.monotonic", lambda: self.now)

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_first_truthy_value_comes_back_at_once(monkeypatch):
    clock = FakeClock(monkeypatch)
    answers = iter([None, [], {"status": "done"}])
    assert eventually(lambda: next(answers), sleep=clock.sleep) == {"status": "done"}
    assert len(clock.sleeps) == 2


def test_a_timeout_names_what_never_happened_and_the_last_value(monkeypatch):
    monkeypatch.delenv(TIME_SCALE_SETTING, raising=False)
    clock = FakeClock(monkeypatch)
    counter = itertools.count()
    with pytest.raises(AssertionError) as failure:
        eventually(
            lambda: next(counter) < 0 and "never",
            timeout=2,
            what="the run ended",
            sleep=clock.sleep,
        )
    message = str(failure.value)
    assert message.startswith("the run ended: not within 2 s")
    assert "last value False" in message
    assert clock.now == pytest.approx(2)


def test_what_may_be_asked_only_at_the_end(monkeypatch):
    clock = FakeClock(monkeypatch)
    seen = []
    with pytest.raises(AssertionError, match=r"rows \[1, 2\]"):
        eventually(
            lambda: seen.append(len(seen) + 1),
            timeout=0.01,
            what=lambda: f"rows {seen[:2]}",
            sleep=clock.sleep,
        )


def test_polls_back_off_from_short_to_a_ceiling(monkeypatch):
    clock = FakeClock(monkeypatch)
    with pytest.raises(AssertionError):
        eventually(lambda: False, timeout=1, sleep=clock.sleep)
    assert clock.sleeps[0] < 0.01
    assert clock.sleeps == sorted(clock.sleeps[:-1]) + clock.sleeps[-1:]
    assert max(clock.sleeps) <= 0.05
    assert len(clock.sleeps) < 40


def test_the_setting_stretches_every_timeout(monkeypatch):
    monkeypatch.setenv(TIME_SCALE_SETTING, "3")
    clock = FakeClock(monkeypatch)
    with pytest.raises(
        AssertionError, match=r"not within 6 s \(2 s × LOOPDESK_TEST_TIME_SCALE=3\)"
    ):
        eventually(lambda: False, timeout=2, sleep=clock.sleep)
    assert clock.now == pytest.approx(6)


@pytest.mark.parametrize(("raw", "scale"), [("", 1.0), ("1", 1.0), ("2.5", 2.5), (" 4 ", 4.0)])
def test_the_scale_is_read_as_a_number(raw, scale):
    assert time_scale({TIME_SCALE_SETTING: raw}) == scale


@pytest.mark.parametrize("raw", ["0", "-1", "slow", "nan"])
def test_a_scale_that_is_not_a_positive_number_is_refused(raw):
    with pytest.raises(ValueError, match=TIME_SCALE_SETTING):
        time_scale({TIME_SCALE_SETTING: raw})
