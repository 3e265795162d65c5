"""Row times for templates: the UTC instant a row was written, as `<time datetime>` values,
and the day separators of a chat. The server renders them in UTC; static/app.js shows
them in the person's own time zone (and moves the separators to match)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta


def _instant(value: str | datetime | None) -> datetime | None:
    """A row's `created_at` (an ISO string ending in Z, as row dicts carry it, or a naive
    UTC datetime) as an aware UTC datetime; None when it is missing or unreadable."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.removesuffix("Z"))
        except ValueError:
            return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def duration(ms) -> str:
    """A step's time: "40 ms", "2.3 s", "1 min 5 s"."""
    ms = int(ms or 0)
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms // 60_000} min {ms % 60_000 // 1000} s"


def utc_iso(value) -> str:
    """`2025-03-12T10:04:05Z`: a valid `datetime` attribute."""
    instant = _instant(value)
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ") if instant else ""


def utc_clock(value) -> str:
    """`10:04`, in UTC (the page shows local time once its script runs)."""
    instant = _instant(value)
    return instant.strftime("%H:%M") if instant else ""


def utc_day(value) -> str:
    """`2025-03-12`: the UTC day a row belongs to."""
    instant = _instant(value)
    return instant.strftime("%Y-%m-%d") if instant else ""


def day_label(day: str, today: date | None = None) -> str:
    """ "Today", "Yesterday", or the date ("Wednesday 12 March 2025") of a `utc_day`."""
    try:
        shown = date.fromisoformat(day)
    except ValueError:
        return ""
    today = today or datetime.now(UTC).date()
    if shown == today:
        return "Today"
    if shown == today - timedelta(days=1):
        return "Yesterday"
    return f"{shown:%A} {shown.day} {shown:%B %Y}"


def register(app) -> None:
    app.jinja_env.filters.update(
        utc_iso=utc_iso, utc_clock=utc_clock, utc_day=utc_day, day_label=day_label
    )
