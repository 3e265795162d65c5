"""The model client: one `anthropic` SDK client per process, streaming raw events and
accumulating the content blocks ourselves (app.llm.wire; cheaper than the SDK's stream
helper and its typed events)."""

from __future__ import annotations

import contextvars
import itertools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import httpx2 as httpx

from app.config import Settings
from app.events import RetryReason
from app.llm.error_bodies import (
    content_type,
    error_message,
    error_type,
    model_error,
    not_json_message,
    start_of,
)
from app.llm.errors import (
    NOT_MESSAGES_API,
    ContextTooLong,
    ModelError,
    StreamAborted,
    StreamCancelled,
    retry_reason,
)
from app.llm.wire import RequestEncoder, TurnAccumulator
from app.telemetry import metrics, tracing

# The anthropic SDK is imported where it is first used, never here: it is nearly half of
# what importing the app costs (1.7 of 4 s on a loaded 2-core machine), and `db upgrade`,
# `seed-demo` or a web process before its first model call have no use for it.
if TYPE_CHECKING:
    import anthropic


# Error types the API may send mid-stream that are worth another try.
TRANSIENT_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
MID_STREAM_RETRIES = 2
# The longest a stream's events are decoded without giving way (see _stream_once).
YIELD_EVERY_SECONDS = 0.02
# A read of the next event that took longer than this waited on the socket (under gevent:
# gave way to the loop), so a stream at a model's pace never yields on top of its reads.
WAITED_SECONDS = 0.001
# How often the SDK retries a call that failed with 408, 409, 429, 5xx or no connection.
SDK_MAX_RETRIES = 3
# The most models a listing reads (the admin page offers them to add).
MAX_LISTED_MODELS = 500


@dataclass
class AssistantTurn:
    content: list[dict[str, Any]]
    stop_reason: str | None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None  # the model that answered (its name as the server gave it)

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
        # The SDK's own spans are off: every model call has one span, ours (`chat
        # <model>`, app/telemetry/tracing.py), streamed or not, named by the GenAI
        # conventions; the SDK would add `anthropic.messages.create` under it for a
        # non-streamed call only (a `post` it is not told the method of has none).
        open_telemetry=False,
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

    def connect_soon(self, then: Callable[[], object] | None = None) -> None:
        """Make the client now, off the serving loop, so that a server's first model call
        neither waits for it nor stalls everyone: the SDK's import, httpx's transport and
        the TLS context's certificates are seconds of CPU, and a run that made them itself
        would hold a gevent worker's loop (measured: 0.1-0.5 s blocks at the first reply).
        A call that comes before it is ready waits for it, yielding. `then`: run in the
        same thread once the client is made (a server settles its heap: app/heap.py),
        when this call is the one that starts making it."""
        if self._anthropic is None and self._connecting_soon is None:

            def connect() -> None:
                self._connect_once()
                if then is not None:
                    then()

            self._connecting_soon = _InOsThread(connect)

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
        """One streamed call, its retries included: one `chat <model>` span when traced."""
        callbacks = callbacks or StreamCallbacks()
        with tracing.model_call(request) as traced:
            if traced.handle.recording:
                noted = traced.first_chunk_then(callbacks.on_activity)
                callbacks = replace(callbacks, on_activity=noted)
            turn = self._stream_with_retries(request, callbacks)
            traced.finished(turn.usage, turn.stop_reason, turn.model, turn.content)
        return turn

    def _stream_with_retries(
        self, request: dict[str, Any], callbacks: StreamCallbacks
    ) -> AssistantTurn:
        self._wait_until_connected()
        import anthropic

        for attempt in range(MID_STREAM_RETRIES + 1):
            try:
                return self._stream_once(request, callbacks)
            except anthropic.APIStatusError as error:
                kind = error_type(error)
                message = error_message(error)
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
                raise model_error(error) from error
            except (anthropic.APIConnectionError, httpx.TransportError) as error:
                # A connection that drops mid-stream surfaces as the transport's own error.
                raise ModelError(
                    "connection_error", f"Could not reach the model: {error}"
                ) from error
        raise AssertionError("unreachable")

    def _stream_once(self, request: dict[str, Any], callbacks: StreamCallbacks) -> AssistantTurn:
        accumulator = TurnAccumulator(callbacks)
        watch = callbacks.watch
        started, first_token = time.monotonic(), 0.0
        stream = self._open_stream(request, callbacks)
        served_as = content_type(stream.response)
        if "text/html" in served_as:
            # A wrong base URL that answers 200 with a web page: the SDK would read no events.
            page = start_of(stream.response)
            stream.close()
            raise ModelError(NOT_MESSAGES_API, not_json_message(page, served_as, 200), status=200)
        if watch is not None:
            watch.stream_opened(stream.response)
        feed, should_stop = accumulator.feed, callbacks.should_stop
        try:
            last_check = last_yield = read_at = time.monotonic()
            for event in stream:
                arrived = time.monotonic()
                if arrived - read_at > WAITED_SECONDS:
                    last_yield = arrived  # the read waited: the loop served everyone meanwhile
                feed(event)
                if not first_token and event.get("type") == "content_block_delta":
                    first_token = time.monotonic()
                if watch is not None:
                    watch.activity()
                if callbacks.on_activity:
                    callbacks.on_activity()
                now = read_at = time.monotonic()
                if now - last_yield > YIELD_EVERY_SECONDS:
                    # A burst already read from the socket decodes without waiting: under
                    # make run's gevent, time.sleep(0) lets the loop serve everyone else.
                    last_yield = now
                    time.sleep(0)
                if should_stop and now - last_check > 0.25:
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
        metrics.model_call(str(request.get("model")), started, first_token, accumulator.usage)
        return AssistantTurn(
            accumulator.content(), accumulator.stop_reason, accumulator.usage, accumulator.model
        )

    def _open_stream(
        self, request: dict[str, Any], callbacks: StreamCallbacks
    ) -> Any:  # the SDK's Stream of plain JSON events
        """`messages.create(stream=True, **request)` through the SDK's documented low-level
        `post`, the same request (headers, retries and their middleware, timeouts, errors)
        with two costs left out: the body is encoded by us, the tool schemas once per tool
        set (the SDK copies and encodes all 18 KB on every call), and the events are read
        as the SDK's `Stream` decodes them, plain JSON, without a typed model each. (The
        SDK's OpenTelemetry spans are off, make_anthropic: the call's span is ours.)"""
        import anthropic

        options: dict[str, Any] = {}
        if callbacks.watch is not None:
            # The watchdog judges silence (and forgives reasoning); the socket timeout is
            # only the backstop for the whole run.
            options["timeout"] = httpx.Timeout(
                connect=10.0, read=float(self.settings.max_run_seconds), write=30.0, pool=30.0
            )
        trace_headers = tracing.carrier()  # the model server may continue the trace
        if trace_headers:
            options["headers"] = trace_headers
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

    def list_models(self, timeout: float, most: int = MAX_LISTED_MODELS) -> list[tuple[str, str]]:
        """What the model server lists (`GET /v1/models`, page after page, at most `most`):
        (id, display name) each, newest first. One try, bounded by `timeout` a page; raises
        ModelError when the list cannot be read."""
        self._wait_until_connected()
        import anthropic

        client = self.anthropic.with_options(timeout=timeout, max_retries=0)
        try:
            listed = client.models.list(limit=min(most, 100))
            return [(m.id, m.display_name) for m in itertools.islice(listed, most)]
        except anthropic.APIStatusError as error:
            raise model_error(error) from error
        except (anthropic.APIError, httpx.TransportError) as error:
            raise ModelError("connection_error", f"Could not reach the model: {error}") from error

    def close(self) -> None:
        if self._anthropic is not None:
            self._anthropic.close()

    def complete(self, request: dict[str, Any]) -> AssistantTurn:
        """A non-streaming call (summaries, memory reconcile)."""
        self._wait_until_connected()
        import anthropic

        with tracing.model_call(request) as traced:
            try:
                headers = tracing.carrier()  # the model server may continue the trace
                message = self.anthropic.messages.create(**request, extra_headers=headers or None)
            except anthropic.APIStatusError as error:
                raise model_error(error) from error
            except anthropic.APIConnectionError as error:
                raise ModelError(
                    "connection_error", f"Could not reach the model: {error}"
                ) from error
            if isinstance(message, str):
                # A 200 that is not JSON: the SDK hands back the body's text.
                raise ModelError(NOT_MESSAGES_API, not_json_message(message, "", 200), status=200)
            content = [b.model_dump(exclude_none=True) for b in message.content]
            turn = AssistantTurn(content, message.stop_reason, _usage(message.usage), message.model)
            traced.finished(turn.usage, turn.stop_reason, turn.model, turn.content)
        return turn
