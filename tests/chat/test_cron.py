"""When a schedule fires: phrases read into cron, five fields only, never-firing and
unknown zones refused, and the next tick kept on the zone's clock across daylight saving."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from app.chat.cron import ScheduleRefused, checked_cron, cron_from_phrase, describe, next_run, zone
from app.error_codes import ErrorCode


@pytest.mark.parametrize(
    ("phrase", "cron"),
    [
        ("every weekday at 9:00", "0 9 * * 1-5"),
        ("every day at 18:30", "30 18 * * *"),
        ("every monday at 8:00", "0 8 * * 1"),
        ("Every  Monday and Friday at 8am", "0 8 * * 1,5"),
        ("every tue, thu at 12:15pm", "15 12 * * 2,4"),
        ("every weekend at 10", "0 10 * * 0,6"),
        ("every sunday at 12am", "0 0 * * 0"),
    ],
)
def test_phrases_read_into_cron(phrase, cron):
    assert cron_from_phrase(phrase) == cron


@pytest.mark.parametrize(
    "phrase", ["every day", "each day at 9", "every day at 24:00", "every day at 13pm", "daily"]
)
def test_phrases_that_say_no_time_are_refused(phrase):
    with pytest.raises(ScheduleRefused) as refused:
        cron_from_phrase(phrase)
    assert refused.value.code == ErrorCode.INVALID_SCHEDULE and refused.value.field == "when"


@pytest.mark.parametrize(
    ("cron", "words"),
    [
        ("* * * * * *", "once a minute"),
        ("0 0 30 2 *", "cannot be read"),
        ("0 0 31 4,6 *", "cannot be read"),
        ("0 9 * *", "five fields"),
    ],
)
def test_a_cron_that_fires_too_often_or_never_is_refused(cron, words):
    with pytest.raises(ScheduleRefused) as refused:
        checked_cron(cron)
    assert words in refused.value.message and refused.value.field == "cron"


def test_a_leap_day_fires_and_reads_in_words():
    assert checked_cron("0 0 29 2 *") == "0 0 29 2 *"
    assert next_run("0 0 29 2 *", ZoneInfo("UTC"), datetime(2026, 3, 1)) == datetime(2028, 2, 29)
    assert describe("0 9 * * 1-5") == "At 09:00 on Monday through Friday"


@pytest.mark.parametrize(
    "name", ["Nowhere/City", "", "../etc/localtime", "/etc/localtime", "a" * 65]
)
def test_unknown_zones_are_refused(name):
    with pytest.raises(ScheduleRefused) as refused:
        zone(name)
    assert refused.value.code == ErrorCode.UNKNOWN_TIME_ZONE


def test_the_next_tick_keeps_to_the_zones_clock_across_daylight_saving():
    berlin = zone("Europe/Berlin")
    # 18:30 in Berlin is 17:30 UTC in winter and 16:30 UTC in summer.
    assert next_run("30 18 * * *", berlin, datetime(2026, 3, 28, 12)) == datetime(
        2026, 3, 28, 17, 30
    )
    assert next_run("30 18 * * *", berlin, datetime(2026, 3, 29, 12)) == datetime(
        2026, 3, 29, 16, 30
    )
    # 02:30 does not exist on the night the clocks go forward: no tick is lost or doubled.
    spring = next_run("30 2 * * *", berlin, datetime(2026, 3, 28, 12))
    assert datetime(2026, 3, 29, 0) <= spring <= datetime(2026, 3, 30, 1, 30)
    # Within the minute a tick is due, it is not due again.
    assert next_run("30 18 * * *", berlin, datetime(2026, 3, 28, 17, 30, 40)) == datetime(
        2026, 3, 29, 16, 30
    )
