"""Where spans go once tracing is on (imported only then: the SDK costs import time a
process that traces nothing should not pay).

`console` prints each span as it ends (JSON on standard output: `make run`'s own output);
`otlp` sends them in batches, OTLP over HTTP/protobuf, to the collector the standard
variables name (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT plus
`/v1/traces`, else the SDK's default, http://localhost:4318/v1/traces; headers, timeout
and compression from the SDK's own OTEL_EXPORTER_OTLP_* variables)."""

from __future__ import annotations

import os
import threading

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)


def make_provider(
    kind: str, service_name: str, endpoint: str | None, traces_endpoint: str | None
) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if kind == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    else:
        url = traces_endpoint or (endpoint.rstrip("/") + "/v1/traces" if endpoint else None)
        provider.add_span_processor(PerProcessBatch(url))
    return provider


def _otlp_exporter(url: str | None) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=url) if url else OTLPSpanExporter()


class PerProcessBatch(SpanProcessor):
    """A batch processor made in the process that ends its first span. `make run` builds
    the app, then gunicorn forks its worker: a batch thread (a greenlet under gevent)
    started before the fork would be copied into the worker half-alive, so none is
    started until a span ends, and a forked process makes its own."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._batch: BatchSpanProcessor | None = None

    def _here(self) -> BatchSpanProcessor:
        with self._lock:
            if self._batch is None or self._pid != os.getpid():
                self._batch = BatchSpanProcessor(_otlp_exporter(self.url))
                self._pid = os.getpid()
            return self._batch

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self._here().on_end(span)

    def shutdown(self) -> None:
        if self._batch is not None and self._pid == os.getpid():
            self._batch.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        if self._batch is not None and self._pid == os.getpid():
            return self._batch.force_flush(timeout_millis)
        return True
