"""Traces (app/telemetry/tracing.py), as an operator's collector would receive them: the
SDK's in-memory exporter stands in for it. A turn gives request -> run -> `chat <model>`
and `execute_tool <name>` with the GenAI attributes; content only when turned on; an MCP
call its own span; a run in a Dramatiq worker stays in its request's trace."""

from __future__ import annotations

import json
import uuid

import dramatiq
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from app import events as ev
from app.accounts.models import ApiToken, User
from app.chat import worker
from app.telemetry import tracing
from tests.factories import REDIS_URL, AuthActions, logged_in_driver, needs_redis
from tests.fake_model import Turn, api_error, text, tool_use
from tests.live import LiveServer, connect_socket, wait_subscribed
from tests.mcp import TIME_COMMAND
from tests.waiting import eventually

PROMPT = "Which offers do I have?"


@pytest.fixture
def spans():
    """Spans end up here; tracing is off again afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None, capture_content=False)
    provider.shutdown()


@pytest.fixture
def traced_app(spans, make_app, fake_model):
    """Made once tracing is on, as create_app finds it when OTEL_* turn it on."""

    def build(**overrides):
        return make_app(anthropic_base_url=fake_model.base_url, **overrides)

    return build


def _driver(app):
    return logged_in_driver(app, AuthActions(app, app.test_client()))


def _named(spans, prefix):
    return [s for s in spans.get_finished_spans() if s.name.startswith(prefix)]


def _one(spans, prefix):
    (found,) = _named(spans, prefix)
    return found


def _turn_with_a_tool_call(app, fake_model, spans):
    fake_model.script(Turn(tool_use("list_offers", {})), Turn(text("You have none yet.")))
    chat = _driver(app)
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, PROMPT))
    assert run["status"] == "completed", run
    eventually(lambda: _named(spans, "invoke_agent"), 10, "the run's span never ended")
    return chat_id


def _attributes_text(spans) -> str:
    return json.dumps([dict(s.attributes or {}) for s in spans.get_finished_spans()], default=str)


def test_a_turn_is_traced_from_its_request_to_its_model_and_tool_calls(
    traced_app, fake_model, spans
):
    app = traced_app()
    chat_id = _turn_with_a_tool_call(app, fake_model, spans)

    request = next(s for s in _named(spans, "POST") if s.name.endswith("/loop"))
    assert request.kind == SpanKind.SERVER
    assert request.attributes["http.route"] == "/api/chats/<int:conversation_id>/loop"
    assert request.attributes["http.response.status_code"] == 202
    assert request.attributes["url.path"] == f"/api/chats/{chat_id}/loop"
    run = _one(spans, "invoke_agent loopdesk")
    assert run.parent.span_id == request.context.span_id, "the run continues its request"
    assert run.attributes["gen_ai.conversation.id"] == str(chat_id)
    assert run.attributes["loopdesk.run.status"] == "completed"

    model = fake_model.requests[0]["model"]
    calls = sorted(_named(spans, f"chat {model}"), key=lambda s: s.start_time)
    assert len(calls) == 2 and all(c.parent.span_id == run.context.span_id for c in calls)
    for call, reply in zip(calls, fake_model.replies, strict=True):
        attributes = call.attributes
        assert call.kind == SpanKind.CLIENT
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "anthropic"
        assert attributes["gen_ai.request.model"] == model
        assert attributes["gen_ai.response.model"] == reply["model"]
        assert attributes["gen_ai.usage.input_tokens"] == reply["usage"]["input_tokens"]
        assert attributes["gen_ai.usage.output_tokens"] == reply["usage"]["output_tokens"]
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == 0
        assert attributes["gen_ai.response.time_to_first_chunk"] >= 0
    assert calls[0].attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert calls[1].attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    # The model server could continue the trace: each call sent its own span's context.
    sent = fake_model.requests[0].headers["traceparent"]
    assert sent.split("-")[1:3] == [
        format(calls[0].context.trace_id, "032x"),
        format(calls[0].context.span_id, "016x"),
    ]

    tool = _one(spans, "execute_tool list_offers")
    called = next(b for b in fake_model.replies[0]["content"] if b["type"] == "tool_use")
    assert tool.parent.span_id == run.context.span_id
    assert tool.attributes["gen_ai.tool.name"] == "list_offers"
    assert tool.attributes["gen_ai.tool.call.id"] == called["id"]
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.attributes["loopdesk.tool.category"] == "read"
    assert tool.attributes["loopdesk.tool.outcome"] == "ran"

    recorded = _attributes_text(spans)
    assert PROMPT not in recorded, "no message content unless the operator turns it on"
    assert "gen_ai.input.messages" not in recorded and "gen_ai.tool.call.result" not in recorded
    assert "test-key" not in recorded and "test-secret" not in recorded


def test_message_content_is_recorded_only_when_the_operator_turns_it_on(
    traced_app, fake_model, spans
):
    app = traced_app(otel_capture_message_content=True)
    _turn_with_a_tool_call(app, fake_model, spans)

    model = fake_model.requests[0]["model"]
    first, second = sorted(_named(spans, f"chat {model}"), key=lambda s: s.start_time)
    assert PROMPT in first.attributes["gen_ai.input.messages"]
    assert "list_offers" in first.attributes["gen_ai.output.messages"]
    assert "You have none yet." in second.attributes["gen_ai.output.messages"]
    tool = _one(spans, "execute_tool list_offers")
    assert tool.attributes["gen_ai.tool.call.arguments"] == "{}"
    assert "gen_ai.tool.call.result" in tool.attributes
    assert "test-key" not in _attributes_text(spans), "content, never the model's key"


def test_an_mcp_call_has_its_span_under_its_tool_call(traced_app, fake_model, spans):
    app = traced_app()
    result = app.test_cli_runner().invoke(args=["mcp", "add", "time", "--command", TIME_COMMAND])
    assert result.exit_code == 0, result.output
    fake_model.script(
        Turn(tool_use("mcp__time__get_current_time", {"timezone": "Europe/Paris"})),
        Turn(text("It is evening.")),
    )
    chat = _driver(app)
    run = chat.wait(chat.send(chat.new_chat(), "What time is it in Paris?"), timeout=30)
    assert run["status"] == "completed", run

    tool = _one(spans, "execute_tool mcp__time__get_current_time")
    mcp = _one(spans, "tools/call get_current_time")
    assert mcp.parent.span_id == tool.context.span_id
    assert mcp.kind == SpanKind.CLIENT
    assert mcp.attributes["mcp.method.name"] == "tools/call"
    assert mcp.attributes["loopdesk.mcp.server"] == "time"
    assert mcp.attributes["network.transport"] == "pipe"
    assert tool.attributes["gen_ai.tool.type"] == "extension"
    assert tool.attributes["loopdesk.tool.outcome"] == "ran"


def test_tracing_is_off_unless_the_settings_turn_it_on(app):
    assert not tracing.enabled()
    with tracing.span("anything") as handle:
        assert handle is tracing.NO_SPAN
    assert tracing.carrier() == {} and tracing.message_options() == {}
    assert tracing.exporter_for(None, None, None) == "none"
    assert tracing.exporter_for(None, "http://collector:4318", None) == "otlp"
    assert tracing.exporter_for("console", None, None) == "console"


@needs_redis
def test_a_run_in_a_dramatiq_worker_is_in_the_trace_of_the_request_that_queued_it(
    traced_app, fake_model, spans, monkeypatch
):
    queue = f"test-runs-{uuid.uuid4().hex[:8]}"
    app = traced_app(run_executor="dramatiq", redis_url=REDIS_URL, run_queue=queue)
    services = app.extensions["services"]
    broker = worker.make_broker(services.settings)
    monkeypatch.setattr(worker, "_services", services)
    monkeypatch.setattr(worker, "_actor", worker.declare_actor(broker, services.settings))
    consumer = dramatiq.Worker(broker, queues={queue}, worker_threads=1, worker_timeout=100)
    consumer.start()
    try:
        _turn_with_a_tool_call(app, fake_model, spans)
    finally:
        consumer.stop()
        broker.close()

    request = next(s for s in _named(spans, "POST") if s.name.endswith("/loop"))
    run = _one(spans, "invoke_agent loopdesk")
    assert run.context.trace_id == request.context.trace_id
    assert run.parent.span_id == request.context.span_id


@needs_redis
def test_a_frame_through_the_redis_hub_links_the_socket_to_the_run_that_sent_it(traced_app, spans):
    hub = traced_app(redis_url=REDIS_URL).extensions["services"].hub
    chat_id = 7  # channels are this test's own (its Redis prefix)
    with tracing.span("GET /ws/chats/<int:conversation_id>", "server") as socket:
        subscription = hub.subscribe(chat_id, None)  # the socket's, in its span
        with tracing.run_span(41) as run:
            hub.publish(chat_id, ev.Status(41, "thinking", 0))
        eventually(lambda: socket.span.links, 10, "the socket's span was never linked")
        hub.unsubscribe(subscription)

    (link,) = _one(spans, "GET /ws/").links
    assert link.context.trace_id == run.span.get_span_context().trace_id
    assert link.context.span_id == run.span.get_span_context().span_id
    assert link.attributes["loopdesk.link"] == "hub_frame"


def test_a_socket_has_one_span_for_its_life_naming_its_chat(traced_app, spans):
    app = traced_app()
    chat = _driver(app)
    chat_id = chat.new_chat()
    with app.extensions["database"].session() as session:
        token, raw = ApiToken.issue(session.get(User, chat.user_id), "test")
        session.add(token)
        session.commit()
    live = LiveServer(app).start()
    app.config["LOOPDESK"] = app.config["LOOPDESK"].model_copy(update={"public_url": live.url})
    try:
        ws = connect_socket(
            f"{live.ws_url}/ws/chats/{chat_id}?format=json",
            headers={"Authorization": f"Bearer {raw}"},
        )
        wait_subscribed(app, chat_id)
        assert not _named(spans, "GET /ws/"), "open: its span has not ended"
        ws.close()
        socket = eventually(lambda: _named(spans, "GET /ws/"), 10, "the socket's span never ended")
    finally:
        live.stop()

    (socket,) = socket
    assert socket.kind == SpanKind.SERVER
    assert socket.attributes["http.route"] == "/ws/chats/<int:conversation_id>"
    assert socket.attributes["gen_ai.conversation.id"] == str(chat_id)
    assert socket.attributes["url.path"] == f"/ws/chats/{chat_id}"
    assert raw not in _attributes_text(spans) and "format=json" not in _attributes_text(spans)

    chat.client.get("/s/a-share-token-7f2a?x=1")  # a path with a token: its rule, never it
    shared = _one(spans, "GET /s/")
    assert shared.attributes["http.route"] == "/s/<token>" and "url.path" not in shared.attributes
    assert "a-share-token-7f2a" not in _attributes_text(spans)


def test_a_failed_model_call_marks_its_span_and_its_runs_with_the_error(
    traced_app, fake_model, spans
):
    app = traced_app()
    fake_model.script(api_error(400, "invalid_request_error", "messages: too many"))
    chat = _driver(app)
    assert chat.wait(chat.send(chat.new_chat(), PROMPT))["status"] == "error"

    call = _one(spans, "chat ")
    assert call.status.status_code == StatusCode.ERROR
    assert call.attributes["error.type"] == "invalid_request_error"
    run = _one(spans, "invoke_agent")
    assert run.status.status_code == StatusCode.ERROR
    assert run.attributes["loopdesk.run.status"] == "error"
