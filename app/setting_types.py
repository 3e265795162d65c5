"""How a setting's text is read: the types of app/config.py's fields whose text is not
taken as it is. Each reader raises ValueError saying what the text must be; load_settings
names the variable."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BeforeValidator


def _bool(raw: str) -> bool:
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _optional_bool(raw: str) -> bool | None:
    return None if raw.strip() == "" else _bool(raw)


def _public_url(raw: str) -> str | None:
    """`https://chat.example.com` (no path): where people reach the app."""
    if not raw.strip():
        return None
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"must be like https://chat.example.com, got {raw!r}")
    return raw.strip().rstrip("/")


def _smtp_url(raw: str) -> str | None:
    """`smtp://user:password@host:587` or `smtps://host:465`. The text is never repeated
    in an error (it may hold a password)."""
    if not raw.strip():
        return None
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ValueError("must be like smtp://user:password@host:587 or smtps://host:465")
    try:
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError:
        raise ValueError("must name a numeric port, like smtp://host:587") from None
    return raw.strip()


def _weights(raw: str) -> dict[str, int]:
    """`claude-haiku-5-5=1,claude-sonnet-5-5=2` → {model: credits}."""
    weights = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        name, _, value = item.partition("=")
        try:
            weights[name.strip()] = int(value)
        except ValueError as exc:
            raise ValueError(f"must be model=whole-number pairs, got {item!r}") from exc
    return weights


def _hosts(raw: str) -> tuple[str, ...]:
    return tuple(h.strip() for h in raw.split(",") if h.strip())


_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?$")


def _origins(raw: str) -> tuple[str, ...]:
    """`https://app.example.com,http://localhost:3000`: exact origins (no wildcard: a
    token in any page's hands is the person's whole account)."""
    origins = _hosts(raw)
    for origin in origins:
        if not _ORIGIN.match(origin):
            raise ValueError(f"must be origins like https://app.example.com, got {origin!r}")
    return tuple(origin.lower() for origin in origins)


def _text(parse: Callable[[str], Any], must_be: str = "") -> BeforeValidator:
    """Reads a variable's text with `parse`; a value that is not text (an override) is
    kept as it is."""

    def read(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return parse(value)
        except ValueError as exc:
            if not must_be:
                raise
            raise ValueError(f"must be {must_be}, got {value!r}") from exc

    return BeforeValidator(read)


# The types of settings whose text is not read as it is (str, Path).
Whole = Annotated[int, _text(int, "a whole number")]
Seconds = Annotated[float, _text(float, "a number of seconds")]
Flag = Annotated[bool, _text(_bool)]
OptionalFlag = Annotated[bool | None, _text(_optional_bool)]
PublicUrl = Annotated[str | None, _text(_public_url)]
SmtpUrl = Annotated[str | None, _text(_smtp_url)]
Weights = Annotated[dict[str, int], _text(_weights)]
Hosts = Annotated[tuple[str, ...], _text(_hosts)]
Origins = Annotated[tuple[str, ...], _text(_origins)]
