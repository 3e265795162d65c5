"""When a scheduled message is sent: a five-field cron expression (minute resolution), or a
phrase such as "every weekday at 9:00" read into one, in an IANA time zone. Parsing and
stepping are cronsim's (a maintained library: DST gaps and repeats handled); the words
here are only the phrases and the refusals."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from app.error_codes import ErrorCode

CRON_MAX_CHARS = 120
PHRASE_MAX_CHARS = 120
ZONE_MAX_CHARS = 64
# A schedule that cannot fire within this long is refused as one that never fires
# (cronsim steps at most this far ahead: every loop here is bounded).
HORIZON_YEARS = 5

DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_DAY_SETS = {"day": "*", "weekday": "1-5", "weekend": "0,6"}
_DAY = r"(?:sun|mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?)(?:day)?s?"
_PHRASE = re.compile(
    rf"every\s+(?P<days>day|weekday|weekend|{_DAY}(?:\s*(?:,|and|&)\s*{_DAY})*)"
    r"\s+at\s+(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<half>am|pm)?",
    re.IGNORECASE,
)


class ScheduleRefused(Exception):
    """Bad input for a schedule: the API answers `status` with `code`, naming `field`."""

    def __init__(self, message: str, code: ErrorCode, field: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.status = status


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name` ("Europe/Berlin", "UTC"), or ScheduleRefused."""
    refused = ScheduleRefused(
        f"'{name[:ZONE_MAX_CHARS]}' is not a time zone: name one such as Europe/Berlin or UTC.",
        ErrorCode.UNKNOWN_TIME_ZONE,
        "timezone",
    )
    # ZoneInfo reads a file named by the key: nothing but a plain IANA name gets that far.
    if not name or len(name) > ZONE_MAX_CHARS or not re.fullmatch(r"[A-Za-z0-9_+\-/]+", name):
        raise refused
    if name.startswith("/") or ".." in name.split("/"):
        raise refused
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise refused from None


def cron_from_phrase(phrase: str) -> str:
    """ "every weekday at 9:00", "every day at 18:30", "every monday and friday at 8am"
    as a cron expression, or ScheduleRefused."""
    found = _PHRASE.fullmatch(" ".join(phrase.split())[:PHRASE_MAX_CHARS])
    if found is None:
        raise ScheduleRefused(
            'Say when as "every day at 18:30", "every weekday at 9:00" or "every monday at '
            '8:00" (or give a cron expression).',
            ErrorCode.INVALID_SCHEDULE,
            "when",
        )
    hour, minute = int(found["hour"]), int(found["minute"] or 0)
    if found["half"] and 1 <= hour <= 12:
        hour = hour % 12 + (12 if found["half"].lower() == "pm" else 0)
    elif found["half"]:
        hour = 24  # "13pm", "0am": no time of day
    if hour > 23 or minute > 59:
        raise ScheduleRefused(
            f"{found['hour']}:{found['minute'] or '00'} is not a time of day.",
            ErrorCode.INVALID_SCHEDULE,
            "when",
        )
    return f"{minute} {hour} * * {_days(found['days'])}"


def _days(words: str) -> str:
    lowered = words.lower()
    if lowered in _DAY_SETS:
        return _DAY_SETS[lowered]
    numbers = {
        next(n for n, day in enumerate(DAYS) if day.startswith(word[:3]))
        for word in re.findall(_DAY, lowered)
    }
    return ",".join(str(n) for n in sorted(numbers))


def checked_cron(expression: str) -> str:
    """`expression` as stored (its fields single-spaced) when it is five fields that fire
    at some time; else ScheduleRefused saying what is wrong."""
    fields = expression.split()
    if len(fields) != 5:
        seconds = " (a sixth field would fire every second: the finest is once a minute)"
        raise ScheduleRefused(
            "A cron expression has five fields: minute, hour, day of month, month, day of "
            f"week{seconds if len(fields) == 6 else ''}.",
            ErrorCode.INVALID_SCHEDULE,
            "cron",
        )
    cron = " ".join(fields)
    if len(cron) > CRON_MAX_CHARS:
        raise ScheduleRefused(
            "That cron expression is too long.", ErrorCode.INVALID_SCHEDULE, "cron"
        )
    try:
        next_run(cron, ZoneInfo("UTC"), datetime(2000, 1, 1))
    except CronSimError as error:
        raise ScheduleRefused(
            f"'{cron}' cannot be read: {error}.", ErrorCode.INVALID_SCHEDULE, "cron"
        ) from None
    except NeverFires:
        raise ScheduleRefused(
            f"'{cron}' never fires (such as the 30th of February).",
            ErrorCode.INVALID_SCHEDULE,
            "cron",
        ) from None
    return cron


class NeverFires(Exception):
    pass


def next_run(cron: str, tz: ZoneInfo, after: datetime) -> datetime:
    """The first time strictly after `after` (naive UTC) that `cron` fires in `tz`, as naive
    UTC. NeverFires when that is not within HORIZON_YEARS."""
    local = after.replace(tzinfo=UTC).astimezone(tz)
    # cronsim steps from the start of the minute: anything later within it has passed.
    start = local.replace(second=0, microsecond=0)
    try:
        fire = next(CronSim(cron, start))
    except StopIteration:
        raise NeverFires from None
    if fire - start > timedelta(days=366 * HORIZON_YEARS):
        raise NeverFires
    return fire.astimezone(UTC).replace(tzinfo=None)


def describe(cron: str) -> str:
    """The expression in words ("At 09:00 on Monday through Friday")."""
    try:
        return str(CronSim(cron, datetime(2000, 1, 1)).explain())
    except (CronSimError, ValueError):
        return cron
