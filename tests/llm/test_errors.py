"""`plain_reason`: a model server's refusal becomes one short plain sentence for the
person, with the reason and without secrets."""

from __future__ import annotations

import pytest

from app.llm.errors import (
    BUSY_TEXT,
    CONTEXT_TOO_LONG_TEXT,
    FORBIDDEN_TEXT,
    KEY_REFUSED_TEXT,
    MAX_REASON_CHARS,
    NO_ROUTE_TEXT,
    REDACTED,
    SERVER_FAILED_TEXT,
    TIMEOUT_TEXT,
    TOO_LARGE_TEXT,
    UNREACHABLE_TEXT,
    WEB_PAGE_TEXT,
    ContextTooLong,
    ModelError,
    error_detail,
    plain_reason,
    redact,
    shorten,
)


@pytest.mark.parametrize(
    ("status", "code", "message", "expected"),
    [
        # The Anthropic API's own types.
        (404, "not_found_error", "model: claude-x", NO_ROUTE_TEXT),
        (401, "authentication_error", "invalid x-api-key", KEY_REFUSED_TEXT),
        (403, "permission_error", "not allowed", FORBIDDEN_TEXT),
        (413, "request_too_large", "Request exceeds the maximum size", TOO_LARGE_TEXT),
        (429, "rate_limit_error", "Slow down", BUSY_TEXT),
        (529, "overloaded_error", "Overloaded", BUSY_TEXT),
        (500, "api_error", "Internal server error", SERVER_FAILED_TEXT),
        (504, "timeout_error", "Request timed out", TIMEOUT_TEXT),
        (200, "overloaded_error", "Overloaded", BUSY_TEXT),  # mid-stream, after retries
        (200, "api_error", "Internal server error", SERVER_FAILED_TEXT),
        (
            400,
            "invalid_request_error",
            "messages.0.content: Field required",
            "The model server refused the request: messages.0.content: Field required.",
        ),
        # Other servers: their own types (or none, or LiteLLM's "None"), known statuses.
        (404, "api_error", "model 'gpt-x' not found", NO_ROUTE_TEXT),
        (404, "None", "no deployment for model", NO_ROUTE_TEXT),
        (401, "api_error", "Unauthorized", KEY_REFUSED_TEXT),
        (403, "api_error", "Forbidden", FORBIDDEN_TEXT),
        (413, "api_error", "Payload Too Large", TOO_LARGE_TEXT),
        (
            422,
            "api_error",
            "body.model: field required",
            "The model server refused the request: body.model: field required.",
        ),
        (
            400,
            "api_error",
            "litellm.BadRequestError: no deployment for model",
            "The model server refused the request: litellm.BadRequestError: no deployment "
            "for model.",
        ),
        (400, "invalid_request_error", "", "The model server refused the request."),
        (429, "api_error", "Too Many Requests", BUSY_TEXT),
        (500, "api_error", "Internal Server Error", SERVER_FAILED_TEXT),
        (502, "api_error", "Bad Gateway", SERVER_FAILED_TEXT),
        (503, "api_error", "Service Unavailable", SERVER_FAILED_TEXT),
        (408, "api_error", "Request Timeout", TIMEOUT_TEXT),
        (
            418,
            "api_error",
            "I'm a teapot",
            "The model server refused the request (HTTP 418): I'm a teapot.",
        ),
        # Not from a status at all.
        (None, "connection_error", "Could not reach the model: refused", UNREACHABLE_TEXT),
        (200, "not_messages_api", "the server answered with an HTML page", WEB_PAGE_TEXT),
        (404, "not_messages_api", "the server answered with an HTML page", WEB_PAGE_TEXT),
        (400, "context_too_long", "prompt is too long", CONTEXT_TOO_LONG_TEXT),
        (
            None,
            "empty_summary",
            "The summary came back empty.",
            "The model could not answer: The summary came back empty.",
        ),
        (None, "something_new", "", "The model could not answer. Please try again."),
    ],
)
def test_the_reason_for_each_refusal(status, code, message, expected):
    assert plain_reason(ModelError(code, message, status=status)) == expected


def test_the_existing_sentences_are_kept():
    # Other tests and people already know these.
    assert "busy" in BUSY_TEXT
    assert UNREACHABLE_TEXT.startswith("Could not reach the model")
    assert "no longer fits" in CONTEXT_TOO_LONG_TEXT
    assert plain_reason(ContextTooLong("context_too_long", "prompt is too long: 1 > 0", status=400))
    assert KEY_REFUSED_TEXT.startswith("The model refused the API key.")


def test_no_reason_is_a_bare_code():
    for status, code in [(404, "not_found_error"), (418, "weird_error"), (None, "odd_error")]:
        reason = plain_reason(ModelError(code, "", status=status))
        assert code not in reason
        assert reason.endswith(".") and len(reason.split()) > 4


def test_a_long_message_is_shortened_with_whitespace_collapsed():
    message = "messages.3.content:\n\n   " + "a field that is far too long and " * 20
    reason = plain_reason(ModelError("invalid_request_error", message, status=400))

    prefix = "The model server refused the request: "
    assert reason.startswith(prefix + "messages.3.content: a field that")
    assert reason.endswith("…")
    assert len(reason) <= len(prefix) + MAX_REASON_CHARS
    assert "\n" not in reason and "  " not in reason


def test_shorten_cuts_at_a_word():
    assert shorten("short  and\tsweet") == "short and sweet"
    cut = shorten("word " * 100, limit=40)
    assert cut == "word word word word word word word word…"


@pytest.mark.parametrize(
    "leak",
    [
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
        "sk-proj-ABCDEFGHIJKLMNOP",
        "sk-1234",  # a LiteLLM master key
    ],
)
def test_api_keys_in_a_server_message_never_reach_the_person(leak):
    message = f"invalid request for key {leak}: model not enabled"
    reason = plain_reason(ModelError("invalid_request_error", message, status=400))
    assert leak not in reason
    assert REDACTED in reason


def test_tokens_and_credentials_are_stripped():
    text = redact(
        "Authorization: Bearer abc.def.ghi-jkl; api_key=topsecret99 "
        'and "x-api-key": "hunter22" at https://admin:pw123456@proxy.local/v1 '
        "token 9f8e7d6c5b4a39281706f5e4d3c2b1a0ffeeddcc"
    )
    for secret in ("abc.def.ghi-jkl", "topsecret99", "hunter22", "pw123456", "9f8e7d6c5b4a"):
        assert secret not in text
    assert "https://[redacted]@proxy.local/v1" in text


def test_the_deployments_own_key_is_stripped_whatever_it_looks_like():
    error = ModelError("invalid_request_error", "key local-key-42 is not allowed", status=400)
    assert "local-key-42" not in plain_reason(error, ["local-key-42", None])
    assert "local-key-42" in plain_reason(error)  # not shaped like a key: only when named


def test_ordinary_words_survive_redaction():
    for message in (
        "max_tokens: 200000 > 64000, which is the maximum allowed for claude-sonnet-4-5",
        "Bearer token missing; basic validation failed for model claude-haiku-4-5-20251001",
        "messages.1.content.0.tool_use_id: unexpected toolu_01A09q90qw90lq917835lq9",
    ):
        assert redact(message) == message


def test_the_detail_keeps_everything():
    error = ModelError("not_found_error", "model: claude-x " + "x" * 500, status=404)
    assert error_detail(error) == f"HTTP 404 not_found_error: model: claude-x {'x' * 500}"
    assert error_detail(ModelError("connection_error", "refused")) == "connection_error: refused"
