"""Where spans go (app/telemetry/exporting.py): OTLP over HTTP/protobuf to the endpoint
the settings name. The receiver here is a stand-in that decodes what the exporter sends
(the OTLP protobuf messages, opentelemetry-proto), not a collector: no OpenTelemetry
collector installs from this machine's registries (docs/observability.md, "Traces")."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from app.telemetry import tracing
from app.telemetry.exporting import make_provider


class _Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_spans_are_sent_as_otlp_protobuf_to_the_named_endpoint(receiver):
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    provider = make_provider("otlp", "loopdesk-test", endpoint, None)
    tracing.install(provider)
    try:
        request = {"model": "claude-test", "max_tokens": 10}
        with tracing.run_span(5), tracing.model_call(request) as call:
            call.finished({"input_tokens": 12, "output_tokens": 3}, "end_turn", None, [])
        assert provider.force_flush(10_000)
    finally:
        tracing.install(None)
        provider.shutdown()

    ((path, content_type, body),) = receiver.received
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    sent = ExportTraceServiceRequest.FromString(body)
    (resource,) = sent.resource_spans
    service = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert service["service.name"] == "loopdesk-test"
    spans = {s.name: s for scope in resource.scope_spans for s in scope.spans}
    assert set(spans) == {"invoke_agent loopdesk", "chat claude-test"}
    chat = {a.key: a.value for a in spans["chat claude-test"].attributes}
    assert chat["gen_ai.usage.input_tokens"].int_value == 12
    assert spans["chat claude-test"].parent_span_id == spans["invoke_agent loopdesk"].span_id
