"""What a person is told when the model server refuses a request: one short plain sentence
with the reason, never a bare error code and never a secret. The full reason (status,
type, the server's whole message) is `error_detail`, for the run log.

Pure functions over a `ModelError`'s `code`, `message` and `status` (app.llm.client);
the servers behind ANTHROPIC_BASE_URL (the Anthropic API, LiteLLM, Ollama, vLLM,
llama.cpp) refuse with their own statuses and types, so both are looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.events import RetryReason


class ModelError(Exception):
    """The model could not answer. `code` is stable; `message` is the server's own words,
    for the run log (app.llm.errors.plain_reason says it to people)."""

    def __init__(self, code: str, message: str, *, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


class ContextTooLong(ModelError):
    pass


class StreamCancelled(Exception):
    pass


class StreamAborted(Exception):
    """The run's watchdog cut the stream: `reason` is "idle" or "max_run"."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# How much of a server's own message a person is shown.
MAX_REASON_CHARS = 160
REDACTED = "[redacted]"

# A server that answered with something other than the Messages API (a wrong base URL).
NOT_MESSAGES_API = "not_messages_api"

CONTEXT_TOO_LONG_TEXT = (
    "This conversation no longer fits the model's context, even summarized. "
    "Start a new chat to continue."
)
BUSY_TEXT = "The model is busy right now and did not answer. Please try again in a moment."
UNREACHABLE_TEXT = "Could not reach the model. Check the connection settings and try again."
KEY_REFUSED_TEXT = "The model refused the API key. An administrator needs to check the settings."
FORBIDDEN_TEXT = (
    "The API key may not use this model. An administrator needs to check the key's access "
    "(and HOST_MODEL and FAST_MODEL)."
)
NO_ROUTE_TEXT = "The model server has no route for this model (check HOST_MODEL and FAST_MODEL)."
TOO_LARGE_TEXT = (
    "The request was too large for the model server. Try a shorter message or start a new chat."
)
TIMEOUT_TEXT = "The model server took too long to answer. Please try again."
SERVER_FAILED_TEXT = "The model server failed and did not answer. Please try again in a moment."
WEB_PAGE_TEXT = (
    "The model server answered with a web page, not the Messages API (check ANTHROPIC_BASE_URL)."
)
REFUSED_PREFIX = "The model server refused the request"

# What the working indicator says while a failed call is retried, by its reason: "busy"
# only for what is busy (overloaded, rate-limited), the real reason otherwise.
RETRY_TEXTS: dict[str, str] = {
    "busy": "The model is busy, retrying…",
    "server_error": "The model server had an error, retrying…",
    "timeout": "The model server took too long to answer, retrying…",
    "unreachable": "Cannot reach the model server, retrying…",
}
RETRY_TEXT = "The model did not answer, retrying…"  # a reason not given
UNKNOWN_PREFIX = "The model could not answer"

# Secrets that announce themselves, in whatever a server echoes back: API keys (Anthropic,
# OpenAI-style and LiteLLM virtual keys, short ones too), bearer tokens, key=value pairs
# with a secret-sounding name, the user:password part of a URL, and long opaque tokens.
SECRET_PATTERNS = (
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{4,}"), REDACTED),
    (re.compile(r"\bld_[A-Za-z0-9_\-]{20,}"), REDACTED),
    (
        re.compile(r"(?i)\b(bearer)\s+(?=[^\s]*[\d._~+/=\-])[A-Za-z0-9._~+/=\-]{6,}"),
        rf"\1 {REDACTED}",
    ),
    (
        re.compile(
            r"(?i)\b((?:x-)?api[_-]?key|access[_-]?token|auth[_-]?token|token|authorization"
            r"|password|secret)(\"?'?\s*[:=]\s*[\"']?)(?!\[redacted\])[^\s\"',;)}]+"
        ),
        rf"\1\2{REDACTED}",
    ),
    (re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"), REDACTED),
    (
        re.compile(r"\b(?=[A-Za-z0-9_]*\d)(?=[A-Za-z0-9_]*[A-Za-z])[A-Za-z0-9_]{32,}\b"),
        REDACTED,
    ),
)


def plain_reason(error: ModelError, secrets: Iterable[str | None] = ()) -> str:
    """One short plain sentence for the person: why the model did not answer. `secrets`
    are values (this deployment's API key) to take out of a server's message besides the
    ones that look like keys."""
    code = (error.code or "").strip()
    status = error.status
    if code == "context_too_long":
        return CONTEXT_TOO_LONG_TEXT
    if code == "connection_error":
        return UNREACHABLE_TEXT
    if code == NOT_MESSAGES_API:
        return WEB_PAGE_TEXT
    if code in ("overloaded_error", "rate_limit_error") or status in (429, 529):
        return BUSY_TEXT
    if code == "authentication_error" or status == 401:
        return KEY_REFUSED_TEXT
    if code == "permission_error" or status == 403:
        return FORBIDDEN_TEXT
    if code == "not_found_error" or status == 404:
        return NO_ROUTE_TEXT
    if code == "request_too_large" or status == 413:
        return TOO_LARGE_TEXT
    if code == "timeout_error" or status in (408, 504):
        return TIMEOUT_TEXT
    said = shorten(redact(error.message or "", secrets))
    if code == "invalid_request_error" or status in (400, 422):
        return _with_reason(REFUSED_PREFIX, said, "")
    # "api_error" is also what a server that names no type gets: its status decides.
    if (status is not None and status >= 500) or (
        code == "api_error" and (status is None or status < 400)
    ):
        return SERVER_FAILED_TEXT
    if status is not None and status >= 400:
        return _with_reason(f"{REFUSED_PREFIX} (HTTP {status})", said, "")
    return _with_reason(UNKNOWN_PREFIX, said, " Please try again.")


def retry_reason(status: int | None, code: str | None = None) -> RetryReason:
    """Why a failed call that is retried failed: `status` of the HTTP answer (200 for an
    error event mid-stream), `code` the error's type when known."""
    if code == "connection_error":
        return "unreachable"
    if code in ("overloaded_error", "rate_limit_error") or status in (429, 529):
        return "busy"
    if code == "timeout_error" or status in (408, 504):
        return "timeout"
    return "server_error"


def retry_text(reason: str | None) -> str:
    """The working indicator's words for a retry of `reason`."""
    return RETRY_TEXTS.get(reason or "", RETRY_TEXT)


def error_detail(error: ModelError) -> str:
    """The full reason, for the run log and the server log: status, type, whole message
    (the run log redacts and caps what it stores)."""
    head = f"HTTP {error.status} " if error.status is not None else ""
    message = error.message or ""
    return f"{head}{error.code}: {message}" if message else f"{head}{error.code}"


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` without the given secret values and anything that looks like a key."""
    # Very short values (a test's "x") would blank out ordinary words.
    for secret in sorted((s for s in secrets if s and len(s) >= 6), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern, replacement in SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def shorten(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """Whitespace collapsed; at most `limit` characters, cut at a word where one is near."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if text[len(cut)] != " " and space >= limit * 3 // 4:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def _with_reason(prefix: str, said: str, otherwise: str) -> str:
    """`prefix: said.`, or `prefix.` and `otherwise` when the server said nothing."""
    if not said:
        return f"{prefix}.{otherwise}"
    if said[-1] not in ".!?…":
        said += "."
    return f"{prefix}: {said}"
