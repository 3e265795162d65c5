"""What `ModelClient` makes of refusals that are not the Messages API's JSON: an HTML page
from a wrong base URL, plain text from a crashed proxy, other servers' JSON shapes. Through
the real SDK, over an in-process transport."""

from __future__ import annotations

import json

import anthropic
import httpx2 as httpx
import pytest

from app.config import load_settings
from app.llm.client import ModelClient, StreamCallbacks, announce_retries
from app.llm.errors import WEB_PAGE_TEXT, ModelError, plain_reason, retry_text

PAGE = (
    "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n"
    "<body><h1>Welcome to nginx!</h1>" + "<p>If you see this page, it works.</p>" * 40 + "</body>"
    "</html>"
)
REQUEST = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}


def _client(tmp_path, status: int, body: str, content_type: str) -> ModelClient:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, text=body, headers={"content-type": content_type})

    sdk = anthropic.Anthropic(
        api_key="test",
        base_url="http://model.invalid",
        http_client=httpx.Client(transport=httpx.MockTransport(answer)),
        max_retries=0,
    )
    settings = load_settings(env={}, overrides={"instance_path": tmp_path, "secret_key": "x"})
    return ModelClient(settings, sdk)


def _refusal(client: ModelClient, streamed: bool) -> ModelError:
    with pytest.raises(ModelError) as caught:
        if streamed:
            client.stream_turn(REQUEST)
        else:
            client.complete(REQUEST)
    return caught.value


@pytest.mark.parametrize("streamed", [True, False])
@pytest.mark.parametrize("status", [404, 502, 200])
def test_an_html_page_is_named_not_dumped(tmp_path, status, streamed):
    error = _refusal(_client(tmp_path, status, PAGE, "text/html; charset=utf-8"), streamed)

    assert error.code == "not_messages_api"
    assert error.status == status
    assert error.message == (
        "the server answered with an HTML page, not the Messages API "
        f"(HTTP {status} titled 'Welcome to nginx!')"
    )
    assert "<" not in error.message
    assert plain_reason(error) == WEB_PAGE_TEXT


def test_an_html_page_without_its_content_type_is_still_recognised(tmp_path):
    error = _refusal(_client(tmp_path, 404, PAGE, "text/plain"), streamed=True)
    assert error.message.startswith("the server answered with an HTML page")


@pytest.mark.parametrize(
    ("status", "body", "content_type", "message"),
    [
        (500, "Internal Server Error\n", "text/plain", "Internal Server Error"),
        (502, "", "text/plain", "the server answered HTTP 502 with an empty body"),
        # Ollama and llama.cpp: {"error": "..."}
        (
            404,
            json.dumps({"error": "model 'gpt-x' not found"}),
            "application/json",
            "model 'gpt-x' not found",
        ),
        # FastAPI-based proxies: a 422 with a validation list.
        (
            422,
            json.dumps({"detail": [{"loc": ["body", "model"], "msg": "field required"}]}),
            "application/json",
            "body.model: field required",
        ),
        # LiteLLM: the Messages API shape with type "None".
        (
            400,
            json.dumps(
                {"error": {"message": "no deployment for model", "type": "None", "code": "400"}}
            ),
            "application/json",
            "no deployment for model",
        ),
    ],
)
def test_other_servers_refusals_keep_their_own_words(tmp_path, status, body, content_type, message):
    error = _refusal(_client(tmp_path, status, body, content_type), streamed=True)

    assert error.status == status
    assert error.code == "api_error"
    assert error.message == message


def test_each_retry_is_announced_with_its_reason(tmp_path):
    """The working indicator names why a call is retried: "busy" only for an overloaded or
    rate-limited server, not for one that failed or could not be reached."""
    answers = [
        httpx.ConnectError("connection refused"),
        httpx.Response(500, json={"type": "error", "error": {"type": "api_error"}}),
        httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error"}}),
        httpx.Response(400, json={"type": "error", "error": {"type": "invalid_request_error"}}),
    ]

    def answer(request: httpx.Request) -> httpx.Response:
        reply = answers.pop(0)
        if isinstance(reply, Exception):
            raise reply
        reply.headers["retry-after-ms"] = "10"
        return reply

    sdk = anthropic.Anthropic(
        api_key="test",
        base_url="http://model.invalid",
        http_client=httpx.Client(transport=httpx.MockTransport(answer)),
        max_retries=3,
        middleware=[announce_retries],
    )
    settings = load_settings(env={}, overrides={"instance_path": tmp_path, "secret_key": "x"})
    reasons: list[str] = []

    with pytest.raises(ModelError):
        ModelClient(settings, sdk).stream_turn(REQUEST, StreamCallbacks(on_retry=reasons.append))

    assert reasons == ["unreachable", "server_error", "busy"]
    assert [retry_text(r) for r in reasons] == [
        "Cannot reach the model server, retrying…",
        "The model server had an error, retrying…",
        "The model is busy, retrying…",
    ]
