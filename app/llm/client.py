"""The model client: one `anthropic` SDK client per process, streaming raw events and
accumulating the content blocks ourselves (app.llm.wire; cheaper than the SDK's stream
helper and its typed events)."""

from __future__ import annotations

import contextvars
import json
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2 as httpx

from app.config import Settings
from app.events import RetryReason
from app.llm.errors import (
    NOT_MESSAGES_API,
    ContextTooLong,
    ModelError,
    StreamAborted,
    StreamCancelled,
    retry_reason,
)
from app.llm.wire import RequestEncoder, TurnAccumulator

# The anthropic SDK is imported where it is first used, never here: it is nearly half of
# what importing the app costs (1.7 of 4 s on a loaded 2-core machine), and `db upgrade`,
# `seed-demo` or a web process before its first model call have no use for it.
if TYPE_CHECKING:
    import anthropic

# What a model error says when the server answered with a web page (a wrong base URL).
HTML_REPLY = "the server answered with an HTML page, not the Messages API"
# A plain-text error body is kept up to this many characters.
MAX_TEXT_BODY_CHARS = 2_000

# Error types the API may send mid-stream that are worth another try.
TRANSIENT_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
MID_STREAM_RETRIES = 2
# How often the SDK retries a call that failed with 408, 409, 429, 5xx or no connection.
SDK_MAX_RETRIES = 3


@dataclass
class AssistantTurn:
    content: list[dict[str, Any]]
    stop_reason: str | None
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.content if b["type"] == "text")

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b["type"] == "tool_use"]


@dataclass
class StreamCallbacks:
    on_text: Callable[[str], None] | None = None
    # A tool_use block's input as it streams (a structured answer being written).
    on_input_json: Callable[[str], None] | None = None
    on_thinking_start: Callable[[], None] | None = None
    on_thinking_end: Callable[[], None] | None = None
    on_activity: Callable[[], None] | None = None
    should_stop: Callable[[], bool] | None = None
    # The call failed in a way that is retried (the model server is busy, failed or could
    # not be reached, or a mid-stream error): called with the reason (app.llm.errors.
    # retry_reason) before each retry, while it waits. Text streamed so far is discarded.
    on_retry: Callable[[RetryReason], None] | None = None
    # The run's watchdog handle (app.chat.liveness.StreamWatch): it sees the stream open
    # and close, every event, and the reasoning spans, and may cut the connection.
    watch: Any = None


def make_anthropic(
    settings: Settings, http_client: httpx.Client | None = None
) -> anthropic.Anthropic:
    """The SDK client. Retries (429, 529, 5xx, connection errors, honouring retry-after)
    are the SDK's; the timeout bounds a silent connection, not a whole stream."""
    import anthropic

    return anthropic.Anthropic(
        api_key=settings.anthropic_api_key or "not-needed",
        base_url=settings.anthropic_base_url,
        max_retries=SDK_MAX_RETRIES,
        timeout=httpx.Timeout(
            connect=10.0, read=float(settings.stream_idle_seconds), write=30.0, pool=30.0
        ),
        http_client=http_client,
        middleware=[announce_retries],
    )


# -- retries the SDK makes, made visible ---------------------------------------------------

# Who hears about the SDK's retries of the call in flight in this thread (or greenlet):
# set around one call by ModelClient, read by the middleware below.
_retry_listener: contextvars.ContextVar[Callable[[RetryReason], None] | None] = (
    contextvars.ContextVar("loopdesk_retry_listener", default=None)
)


# The SDK's middleware hands over its own request and response objects (internal types).
def announce_retries(request: Any, call_next: Callable[[Any], Any]) -> Any:
    """SDK middleware (it runs once per HTTP attempt, inside the SDK's retry loop): an
    attempt that failed in a way the SDK retries, with retries left, tells the listener
    of the call in flight before the SDK waits and tries again."""
    import anthropic

    try:
        response = call_next(request)
    except (anthropic.APIConnectionError, httpx.TransportError) as error:
        if _retries_left(request):
            slow = isinstance(error, anthropic.APITimeoutError | httpx.TimeoutException)
            reached = not isinstance(error, httpx.ConnectTimeout)
            _notify_retry("timeout" if slow and reached else "unreachable")
        raise
    if response.status_code >= 400 and _retries_left(request) and _sdk_retries(response):
        _notify_retry(retry_reason(response.status_code))
    return response


def _retries_left(request: Any) -> bool:
    return bool(request.retries_taken < request.options.get_max_retries(SDK_MAX_RETRIES))


def _sdk_retries(response: Any) -> bool:
    """The SDK's own rule (anthropic._base_client._should_retry) for an error response."""
    header: str | None = response.headers.get("x-should-retry")
    if header in ("true", "false"):
        return header == "true"
    return bool(response.status_code in (408, 409, 429) or response.status_code >= 500)


def _notify_retry(reason: RetryReason) -> None:
    listener = _retry_listener.get()
    if listener is not None:
        listener(reason)


def _usage(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    return {k: v for k, v in usage.model_dump().items() if isinstance(v, int)}


def _error_type(error: anthropic.APIStatusError) -> str:
    body = error.body if isinstance(error.body, dict) else {}
    inner = body.get("error", body)
    kind = inner.get("type", "") if isinstance(inner, dict) else ""
    if not isinstance(kind, str) or kind in ("None", "null"):  # LiteLLM sends "None"
        return ""
    if not kind and _looks_like_html(_body_text(error), _content_type(error.response)):
        return NOT_MESSAGES_API
    return kind


def _error_message(error: anthropic.APIStatusError) -> str:
    """The server's own words: the Messages API's `error.message`, the shapes other servers
    use ({"error": "..."}, {"detail": ...}), a plain-text body, or a short note for a
    body that is not the Messages API at all (an HTML page from a wrong base URL)."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str) and inner.strip():
            return inner
        detail = body.get("detail") or body.get("message")
        if isinstance(detail, str) and detail.strip():
            return detail
        if (
            isinstance(detail, list)
            and detail
            and all(isinstance(item, dict) and item.get("msg") for item in detail)
        ):  # a FastAPI validation error (a 422 from some proxies)
            return "; ".join(_validation_item(item) for item in detail)
        return json.dumps(body, ensure_ascii=False, default=str)
    return _not_json_message(_body_text(error), _content_type(error.response), error.status_code)


def _validation_item(item: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in item.get("loc") or ())
    return f"{where}: {item['msg']}" if where else str(item["msg"])


def _body_text(error: anthropic.APIStatusError) -> str:
    if isinstance(error.body, str):
        return error.body
    return "" if error.body is None else json.dumps(error.body, default=str)


def _content_type(response: httpx.Response | None) -> str:
    return (response.headers.get("content-type", "") if response is not None else "").lower()


def _looks_like_html(text: str, content_type: str) -> bool:
    head = text.lstrip()[:512].lower()
    return "text/html" in content_type or head.startswith(("<!doctype html", "<html", "<head"))


def _not_json_message(text: str, content_type: str, status: int | None) -> str:
    """What a body that is not Messages API JSON says, briefly."""
    if _looks_like_html(text, content_type):
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
        named = f" titled {' '.join(title.group(1).split())[:80]!r}" if title else ""
        return f"{HTML_REPLY} (HTTP {status}{named})"
    text = " ".join(text.split())
    if not text:
        return f"the server answered HTTP {status} with an empty body"
    return text if len(text) <= MAX_TEXT_BODY_CHARS else text[:MAX_TEXT_BODY_CHARS] + "…"


def _start_of(response: httpx.Response, limit: int = 65_536) -> str:
    """The first `limit` bytes of a streamed body, as text."""
    data = b""
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) >= limit:
            break
    return data[:limit].decode("utf-8", "replace")


def _model_error(error: anthropic.APIStatusError) -> ModelError:
    return ModelError(
        _error_type(error) or "api_error", _error_message(error), status=error.status_code
    )


class _InOsThread:
    """`work()` run in an OS thread of its own (under gevent, one of its hub's pool: a
    greenlet would hold the worker's loop for the whole of it); `wait()` yields to the
    loop while it runs and answers whether it succeeded."""

    def __init__(self, work: Callable[[], object]):
        try:
            from gevent import get_hub, monkey
        except ImportError:
            monkey = None
        if monkey is not None and monkey.is_module_patched("threading"):
            self._result = get_hub().threadpool.spawn(work)
            self._thread = None
        else:
            self._failed = False
            self._thread = threading.Thread(
                target=self._run, args=(work,), name="model-connect", daemon=True
            )
            self._thread.start()

    def _run(self, work: Callable[[], object]) -> None:
        try:
            work()
        except Exception:
            self._failed = True
            raise

    def wait(self) -> bool:
        if self._thread is None:
            self._result.wait()
            return bool(self._result.successful())
        self._thread.join()
        return not self._failed


class ModelClient:
    """Streams one model call and returns the assembled assistant turn."""

    def __init__(
        self,
        settings: Settings,
        anthropic_client: anthropic.Anthropic | None = None,
        *,
        connect: Callable[[], anthropic.Anthropic] | None = None,
    ):
        """`anthropic_client`, or `connect` to make it at the first call (the SDK's import
        and client then cost nothing to a process that never calls the model)."""
        self.settings = settings
        self._anthropic = anthropic_client
        self._connect = connect
        self._connecting = threading.Lock()
        self._connecting_soon: _InOsThread | None = None
        self._encoder = RequestEncoder()

    def connect_soon(self) -> None:
        """Make the client now, off the serving loop, so that a server's first model call
        neither waits for it nor stalls everyone: the SDK's import, httpx's transport and
        the TLS context's certificates are seconds of CPU, and a run that made them itself
        would hold a gevent worker's loop (measured: 0.1-0.5 s blocks at the first reply).
        A call that comes before it is ready waits for it, yielding."""
        if self._anthropic is None and self._connecting_soon is None:
            self._connecting_soon = _InOsThread(self._connect_once)

    def _connect_once(self) -> anthropic.Anthropic:
        with self._connecting:
            if self._anthropic is None:
                assert self._connect is not None, "a ModelClient needs a client or connect"
                self._anthropic = self._connect()
        return self._anthropic

    def _wait_until_connected(self) -> anthropic.Anthropic:
        """The client, made if need be. Called before a call's own `import anthropic`:
        importing the SDK while the background connection is importing it would hold the
        loop on the interpreter's import lock; waiting for it yields."""
        if self._anthropic is None:
            if self._connecting_soon is not None:
                self._connecting_soon.wait()
            if self._anthropic is None:
                self._connect_once()
        assert self._anthropic is not None  # _connect_once made it or raised
        return self._anthropic

    @property
    def anthropic(self) -> anthropic.Anthropic:
        return self._wait_until_connected()

    def stream_turn(
        self, request: dict[str, Any], callbacks: StreamCallbacks | None = None
    ) -> AssistantTurn:
        self._wait_until_connected()
        import anthropic

        callbacks = callbacks or StreamCallbacks()
        for attempt in range(MID_STREAM_RETRIES + 1):
            try:
                return self._stream_once(request, callbacks)
            except anthropic.APIStatusError as error:
                kind = _error_type(error)
                message = _error_message(error)
                if error.status_code == 400 and "prompt is too long" in message:
                    raise ContextTooLong("context_too_long", message, status=400) from error
                # A mid-stream `error` event arrives as a status error with status 200; the
                # SDK does not retry it, so transient ones are retried here.
                if (
                    error.status_code == 200
                    and kind in TRANSIENT_STREAM_ERRORS
                    and attempt < MID_STREAM_RETRIES
                ):
                    if callbacks.on_retry:
                        callbacks.on_retry(retry_reason(200, kind))
                    time.sleep(random.uniform(0.2, 0.6) * (attempt + 1))
                    continue
                raise _model_error(error) from error
            except (anthropic.APIConnectionError, httpx.TransportError) as error:
                # A connection that drops mid-stream surfaces as the transport's own error.
                raise ModelError(
                    "connection_error", f"Could not reach the model: {error}"
                ) from error
        raise AssertionError("unreachable")

    def _stream_once(self, request: dict[str, Any], callbacks: StreamCallbacks) -> AssistantTurn:
        accumulator = TurnAccumulator(callbacks)
        watch = callbacks.watch
        stream = self._open_stream(request, callbacks)
        content_type = _content_type(stream.response)
        if "text/html" in content_type:
            # A wrong base URL that answers 200 with a web page: the SDK would read no events.
            page = _start_of(stream.response)
            stream.close()
            raise ModelError(
                NOT_MESSAGES_API, _not_json_message(page, content_type, 200), status=200
            )
        if watch is not None:
            watch.stream_opened(stream.response)
        feed, should_stop = accumulator.feed, callbacks.should_stop
        try:
            last_check = time.monotonic()
            for event in stream:
                feed(event)
                if watch is not None:
                    watch.activity()
                if callbacks.on_activity:
                    callbacks.on_activity()
                if should_stop and (now := time.monotonic()) - last_check > 0.25:
                    last_check = now
                    if should_stop():
                        raise StreamCancelled()
        except StreamCancelled:
            raise
        except Exception as error:
            if watch is not None and watch.aborted:
                raise StreamAborted(watch.aborted) from error
            if should_stop and should_stop():
                # Stopped: the watchdog shut the connection under the read (app.chat.liveness).
                raise StreamCancelled() from error
            raise
        finally:
            if watch is not None:
                watch.stream_closed()
            stream.close()
        return AssistantTurn(accumulator.content(), accumulator.stop_reason, accumulator.usage)

    def _open_stream(
        self, request: dict[str, Any], callbacks: StreamCallbacks
    ) -> Any:  # the SDK's Stream of plain JSON events
        """`messages.create(stream=True, **request)` through the SDK's documented low-level
        `post`, the same request (headers, retries and their middleware, timeouts, errors)
        with two costs left out: the body is encoded by us, the tool schemas once per tool
        set (the SDK copies and encodes all 18 KB on every call), and the events are read
        as the SDK's `Stream` decodes them, plain JSON, without a typed model each. (Nor
        does the SDK start its OpenTelemetry span for the call: the app configures none.)"""
        import anthropic

        options: dict[str, Any] = {}
        if callbacks.watch is not None:
            # The watchdog judges silence (and forgives reasoning); the socket timeout is
            # only the backstop for the whole run.
            options["timeout"] = httpx.Timeout(
                connect=10.0, read=float(self.settings.max_run_seconds), write=30.0, pool=30.0
            )
        listening = _retry_listener.set(callbacks.on_retry)
        try:
            return self.anthropic.post(  # type: ignore[call-overload]
                "/v1/messages",  # (options is the SDK's RequestOptions TypedDict, built as a dict)
                content=self._encoder.body(request),
                cast_to=object,
                options=options,
                stream=True,
                stream_cls=anthropic.Stream[object],
            )
        finally:
            _retry_listener.reset(listening)

    def count_tokens(self, request: dict[str, Any]) -> int | None:
        """The API's own count for a request, or None when it cannot be had."""
        self._wait_until_connected()
        import anthropic

        fields = {
            k: request[k]
            for k in ("model", "system", "messages", "tools", "thinking")
            if k in request
        }
        try:
            return self.anthropic.messages.count_tokens(**fields).input_tokens
        except (anthropic.APIError, httpx.TransportError):
            return None

    def close(self) -> None:
        if self._anthropic is not None:
            self._anthropic.close()

    def complete(self, request: dict[str, Any]) -> AssistantTurn:
        """A non-streaming call (summaries, memory reconcile)."""
        self._wait_until_connected()
        import anthropic

        try:
            message = self.anthropic.messages.create(**request)
        except anthropic.APIStatusError as error:
            raise _model_error(error) from error
        except anthropic.APIConnectionError as error:
            raise ModelError("connection_error", f"Could not reach the model: {error}") from error
        if isinstance(message, str):
            # A 200 that is not JSON: the SDK hands back the body's text.
            raise ModelError(NOT_MESSAGES_API, _not_json_message(message, "", 200), status=200)
        content = [b.model_dump(exclude_none=True) for b in message.content]
        return AssistantTurn(
            content=content, stop_reason=message.stop_reason, usage=_usage(message.usage)
        )
