"""OpenTelemetry traces, named by the GenAI semantic conventions: a span per HTTP request
and socket, per run (`invoke_agent loopdesk`), per model call (`chat <model>`), per tool
call (`execute_tool <name>`) and per MCP call (`tools/call <name>`).

Off unless the standard variables turn it on (OTEL_TRACES_EXPORTER=console|otlp, or an
OTLP endpoint; app/config.py reads them and create_app hands them to `configure`). Off,
every helper here returns at once and nothing of OpenTelemetry is imported; on, the SDK
is imported by app/telemetry/exporting.py, once. The spans come from this module's own
tracer, not the global one, so a test can install an in-memory provider per module.

What a span never holds: a secret (keys, tokens, cookies, an MCP server's headers), a
query string, a path with a token in it. What it holds only when the operator sets
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true: prompts, replies, tool
arguments and results (each cut at MAX_CONTENT_CHARS)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

# What a span's content attribute keeps of a long prompt or result.
MAX_CONTENT_CHARS = 16_000
SCOPE = "loopdesk"
AGENT_NAME = "loopdesk"
PROVIDER = "anthropic"
# The key a Dramatiq message carries its sender's trace context under (its options).
MESSAGE_OPTION = "trace_context"

Result = TypeVar("Result")


class _State:
    """The process's tracer (None: tracing is off) and whether content is captured."""

    tracer: Tracer | None = None
    provider: TracerProvider | None = None
    capture_content = False


_state = _State()


def enabled() -> bool:
    return _state.tracer is not None


def exporter_for(exporter: str | None, endpoint: str | None, traces_endpoint: str | None) -> str:
    """Which exporter the standard variables ask for: `console`, `otlp` or `none`. An
    OTLP endpoint alone means OTLP (as the SDK's own configuration reads it)."""
    if exporter in ("console", "otlp", "none"):
        return exporter
    return "otlp" if endpoint or traces_endpoint else "none"


def configure(
    *,
    exporter: str | None,
    endpoint: str | None,
    traces_endpoint: str | None,
    service_name: str,
    capture_content: bool,
) -> None:
    """Turn tracing on once per process when the settings ask for it (a second app in the
    same process keeps the first one's provider); off, nothing is imported."""
    _state.capture_content = capture_content
    kind = exporter_for(exporter, endpoint, traces_endpoint)
    if kind == "none" or _state.tracer is not None:
        return
    from app.telemetry.exporting import make_provider

    install(make_provider(kind, service_name, endpoint, traces_endpoint))


def install(provider: TracerProvider | None, capture_content: bool | None = None) -> None:
    """Spans go to `provider` from now on (None: tracing off). Tests install an in-memory
    one; `configure` installs the one the settings describe."""
    _state.provider = provider
    _state.tracer = provider.get_tracer(SCOPE) if provider is not None else None
    if capture_content is not None:
        _state.capture_content = capture_content


class SpanHandle:
    """A span to add to, or nothing (tracing off, or no span around)."""

    __slots__ = ("span",)

    def __init__(self, span: Span | None) -> None:
        self.span = span

    @property
    def recording(self) -> bool:
        return self.span is not None and self.span.is_recording()

    def set(self, key: str, value: Any) -> None:
        if self.span is not None and value is not None:
            self.span.set_attribute(key, value)

    def content(self, key: str, value: Any) -> None:
        """Message content, only when the operator turned its capture on."""
        if self.span is not None and _state.capture_content and value is not None:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            self.span.set_attribute(key, text[:MAX_CONTENT_CHARS])

    def fail(self, error_type: str) -> None:
        if self.span is not None:
            from opentelemetry.trace import Status, StatusCode

            self.span.set_attribute("error.type", error_type)
            self.span.set_status(Status(StatusCode.ERROR))


NO_SPAN = SpanHandle(None)


def current() -> SpanHandle:
    """The span this code runs in (a request's, a run's), to add an attribute to."""
    if _state.tracer is None:
        return NO_SPAN
    from opentelemetry import trace

    return SpanHandle(trace.get_current_span())


@contextlib.contextmanager
def span(
    name: str, kind: str = "internal", attributes: Mapping[str, Any] | None = None
) -> Iterator[SpanHandle]:
    """A span around the block, the current one inside it; an exception marks it failed
    with its `code` (a model error's) or its type (`error.type`) and goes on."""
    tracer = _state.tracer
    if tracer is None:
        yield NO_SPAN
        return
    from opentelemetry.trace import SpanKind

    clean = {k: v for k, v in (attributes or {}).items() if v is not None}
    with tracer.start_as_current_span(
        name, kind=SpanKind[kind.upper()], attributes=clean, record_exception=False
    ) as opened:
        handle = SpanHandle(opened)
        try:
            yield handle
        except BaseException as error:
            code = getattr(error, "code", None)  # a model error's stable code
            handle.fail(code if isinstance(code, str) and code else type(error).__qualname__)
            raise


# -- HTTP requests and sockets (started and ended by Flask's hooks, app/web) -----------


@dataclass
class ServerSpan:
    span: Span
    token: object
    method: str


def start_request(method: str, path: str | None, headers: Any) -> ServerSpan | None:
    """The server span of one request (a socket's lasts its life), continuing the trace a
    `traceparent` header names. `path`: None when it may hold a token."""
    tracer = _state.tracer
    if tracer is None:
        return None
    from opentelemetry import context, propagate, trace
    from opentelemetry.trace import SpanKind

    parent = propagate.extract(headers)
    attributes = {"http.request.method": method}
    if path is not None:
        attributes["url.path"] = path
    opened = tracer.start_span(method, parent, SpanKind.SERVER, attributes)
    token = context.attach(trace.set_span_in_context(opened, parent))
    return ServerSpan(opened, token, method)


def end_request(
    started: ServerSpan, route: str | None, status: int | None, error: BaseException | None
) -> None:
    from opentelemetry import context

    handle = SpanHandle(started.span)
    if route:
        started.span.update_name(f"{started.method} {route}")
        handle.set("http.route", route)
    handle.set("http.response.status_code", status)
    if error is not None:
        handle.fail(type(error).__qualname__)
    elif status is not None and status >= 500:
        handle.fail(str(status))
    started.span.end()
    with contextlib.suppress(Exception):  # a hook that ran in another context: let it be
        context.detach(started.token)  # type: ignore[arg-type]


# -- across threads and processes ------------------------------------------------------


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers (`traceparent`), to send along."""
    if _state.tracer is None:
        return {}
    from opentelemetry import propagate

    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


def message_options() -> dict[str, Any]:
    """Options for a Dramatiq message that carry the sender's trace (none when off)."""
    headers = carrier()
    return {MESSAGE_OPTION: headers} if headers else {}


@contextlib.contextmanager
def continued(headers: Mapping[str, str] | None) -> Iterator[None]:
    """The block runs in the trace `headers` carried (from `carrier`), in another thread
    or process: its spans are children of the sender's."""
    if _state.tracer is None or not headers:
        yield
        return
    from opentelemetry import context, propagate

    token = context.attach(propagate.extract(dict(headers)))
    try:
        yield
    finally:
        context.detach(token)


def carried(work: Callable[..., Result]) -> Callable[..., Result]:
    """`work`, to be run in another thread (a pool's) in the trace current here."""
    headers = carrier()
    if not headers:
        return work

    def in_trace(*args: Any, **kwargs: Any) -> Result:
        with continued(headers):
            return work(*args, **kwargs)

    return in_trace


# -- the run, its model calls, its tools ------------------------------------------------


# The statuses a run ends in that mark its span failed.
FAILED_RUNS = ("error",)


def run_ended(handle: SpanHandle, status: str | None) -> None:
    """The run's end on its span: its status (None: not this process's to run)."""
    handle.set("loopdesk.run.status", status)
    if status in FAILED_RUNS:
        handle.fail(f"run_{status}")


def run_span(run_id: int) -> contextlib.AbstractContextManager[SpanHandle]:
    """One run of the host agent, from its claim to its end."""
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT_NAME,
        "gen_ai.provider.name": PROVIDER,
        "loopdesk.run.id": run_id,
    }
    return span(f"invoke_agent {AGENT_NAME}", "internal", attributes)


class ModelCall:
    """What a model call's span learns as the call goes: its first chunk, then its end."""

    def __init__(self, handle: SpanHandle) -> None:
        self.handle = handle
        self.started = time.monotonic()
        self.chunked = False

    def first_chunk_then(self, then: Callable[[], None] | None) -> Callable[[], None]:
        """A stream's activity callback that notes the first chunk's time, then `then`."""

        def on_activity() -> None:
            if not self.chunked:
                self.chunked = True
                seconds = time.monotonic() - self.started
                self.handle.set("gen_ai.response.time_to_first_chunk", seconds)
                if self.handle.span is not None:
                    self.handle.span.add_event("gen_ai.first_chunk")
            if then is not None:
                then()

        return on_activity

    def finished(
        self,
        usage: Mapping[str, int],
        stop_reason: str | None,
        response_model: str | None,
        content: Any,
    ) -> None:
        handle = self.handle
        handle.set("gen_ai.response.model", response_model)
        handle.set("gen_ai.usage.input_tokens", usage.get("input_tokens"))
        handle.set("gen_ai.usage.output_tokens", usage.get("output_tokens"))
        handle.set("gen_ai.usage.cache_read.input_tokens", usage.get("cache_read_input_tokens"))
        handle.set(
            "gen_ai.usage.cache_creation.input_tokens", usage.get("cache_creation_input_tokens")
        )
        if stop_reason:
            handle.set("gen_ai.response.finish_reasons", [stop_reason])
        handle.content("gen_ai.output.messages", [{"role": "assistant", "content": content}])


@contextlib.contextmanager
def model_call(request: Mapping[str, Any]) -> Iterator[ModelCall]:
    """One call to the model (its retries included): `chat <model>`."""
    model = str(request.get("model") or "")
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": request.get("max_tokens"),
    }
    with span(f"chat {model}", "client", attributes) as handle:
        if handle.recording:
            handle.content("gen_ai.system_instructions", request.get("system"))
            handle.content("gen_ai.input.messages", request.get("messages"))
        yield ModelCall(handle)


class ToolCall:
    def __init__(self, handle: SpanHandle) -> None:
        self.handle = handle

    def outcome(self, outcome: str, result: Any = None) -> None:
        """`ran`, `held` (waits on the person), `refused` or `failed`."""
        self.handle.set("loopdesk.tool.outcome", outcome)
        if outcome == "failed":
            self.handle.fail("tool_error")
        self.handle.content("gen_ai.tool.call.result", result)


@contextlib.contextmanager
def tool_call(
    name: str, call_id: str, category: str, arguments: Any, origin: str = ""
) -> Iterator[ToolCall]:
    """One tool call: `execute_tool <name>`, its category and how it came out. `origin`:
    the MCP server whose tool it is (an `extension`), empty for our own (a `function`)."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id or None,
        "gen_ai.tool.type": "extension" if origin else "function",
        "loopdesk.tool.category": category,
        "loopdesk.mcp.server": origin or None,
    }
    with span(f"execute_tool {name}", "internal", attributes) as handle:
        handle.content("gen_ai.tool.call.arguments", arguments)
        yield ToolCall(handle)


def tool_not_run(
    name: str, call_id: str, category: str, outcome: str, result: Any = None, origin: str = ""
) -> None:
    """A call that did not run: `held` for the person's approval, or `refused` (its input
    did not fit its schema). A span that says so, for the trace to show every call."""
    if _state.tracer is None:
        return
    with tool_call(name, call_id, category, None, origin) as call:
        call.outcome(outcome, result)


def mcp_call(
    method: str, tool_name: str, server_name: str, url: str | None
) -> contextlib.AbstractContextManager[SpanHandle]:
    """One request to an MCP server (`tools/call <tool>`): the server's name and address,
    never its headers or the URL's path and query."""
    attributes: dict[str, Any] = {
        "mcp.method.name": method,
        "gen_ai.tool.name": tool_name,
        "gen_ai.operation.name": "execute_tool",
        "loopdesk.mcp.server": server_name,
        "network.transport": "tcp" if url else "pipe",
    }
    if url:
        parts = urlsplit(url)
        attributes["server.address"] = parts.hostname
        attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    return span(f"{method} {tool_name}", "client", attributes)


# -- frames through the Redis hub -------------------------------------------------------
# A frame published on a conversation's channel while tracing is on starts with
# `t:<traceparent>|`: the trace of the run that sent it. The receiving process links the
# socket's span to it (a span link, not a parent: a socket outlives many runs, and a run
# is heard by many sockets).
FRAME_TRACE = b"t:"
# The most links a socket's span keeps (the SDK's default limit too).
MAX_LINKS = 128


def frame_trace() -> str:
    """The current trace context as a `traceparent`, for a frame sent to other processes
    ('' when tracing is off or nothing is traced here)."""
    return carrier().get("traceparent", "")


def traced_frame(traceparent: str | None, payload: str) -> str:
    return f"t:{traceparent}|{payload}" if traceparent else payload


def split_frame(data: bytes) -> tuple[str | None, bytes]:
    """A received frame's trace context (None: it carried none) and the frame itself."""
    if not data.startswith(FRAME_TRACE):
        return None, data
    head, _, rest = data[len(FRAME_TRACE) :].partition(b"|")
    return head.decode("ascii", "replace"), rest


class SpanLinks:
    """Links from the span current where it is made (a socket's) to each span context its
    frames came from, each once."""

    def __init__(self) -> None:
        self.span = current().span
        self.seen: set[str] = set()

    def add(self, traceparent: str) -> None:
        if self.span is None or traceparent in self.seen or len(self.seen) >= MAX_LINKS:
            return
        self.seen.add(traceparent)
        from opentelemetry import propagate, trace

        sender = trace.get_current_span(propagate.extract({"traceparent": traceparent}))
        context = sender.get_span_context()
        if context.is_valid:
            self.span.add_link(context, {"loopdesk.link": "hub_frame"})
