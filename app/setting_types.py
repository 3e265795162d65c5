"""How a setting's text is read: the types of app/config.py's fields whose text is not
taken as it is. Each reader raises ValueError saying what the text must be; load_settings
names the variable. Also `setting()`, which declares a field, and the OpenTelemetry group
of fields (`Telemetry`, the base of `Settings`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field
from pydantic.json_schema import JsonDict
from pydantic_settings import BaseSettings


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


def setting(default: Any, env: str, meaning: str, default_text: str = "", **more: Any) -> Any:
    """A field of Settings read from the variable `env` (an empty one keeps the default);
    `meaning` and `default_text` (for a default that is not a plain value: derived,
    generated, or a path) are what docs/reference.md says of it. `more`: constraints."""
    extra: JsonDict | None = {"default_text": default_text} if default_text else None
    if isinstance(default, dict):
        more["default_factory"] = dict
    else:
        more["default"] = default
    return Field(validation_alias=env, description=meaning, json_schema_extra=extra, **more)


_TRACES = "`console`: spans printed on standard output; `otlp`: sent to a collector (OTLP/HTTP)"
_OTLP = "the collector's base URL (traces go to `/v1/traces`); setting it turns traces on"
_CONTENT = "spans carry prompts, replies, tool arguments and results (cut at 16,000 characters)"


class Telemetry(BaseSettings):
    """OpenTelemetry's standard variables (app/telemetry; the SDK reads its others itself)."""

    otel_traces_exporter: Literal["console", "otlp", "none"] | None = setting(
        None, "OTEL_TRACES_EXPORTER", _TRACES, default_text="`otlp` with an endpoint, else off"
    )
    otel_exporter_otlp_endpoint: str | None = setting(None, "OTEL_EXPORTER_OTLP_ENDPOINT", _OTLP)
    otel_exporter_otlp_traces_endpoint: str | None = setting(
        None, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "the collector's traces URL (wins)"
    )
    otel_service_name: str = setting("loopdesk", "OTEL_SERVICE_NAME", "the traces' service name")
    otel_capture_message_content: Flag = setting(
        False, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", _CONTENT
    )
