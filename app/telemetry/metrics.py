"""Prometheus metrics (docs/observability.md, "Metrics"): each metric declared once here,
recorded with one call where its thing happens (a run's end, a model call, a tool call,
a held call's answer, a socket, a 429).

Under gunicorn every process records into its own files in PROMETHEUS_MULTIPROC_DIR
(prometheus_client's multiprocess mode, chosen when it is imported: metrics_dir.py sets
the directory up first), and a scrape sums them; elsewhere (tests, Flask's server) the
default registry holds them in memory. Recording is a lock and an mmap write: it never
waits on the network, so make run's gevent loop is not held.

What a scrape reads from the database (queue depth and age) is a collector the web layer
hands in (`QueueCollector` with its reader), since this package imports nothing of the
app's. Labels are names from a short list (statuses, tools, models, reasons): never an
id, a person or anything a person typed."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# Seconds: a run waits on several model calls and tools; a model call streams for up to
# minutes; the first token comes in under a second or after a long think.
RUN_BUCKETS = (0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
MODEL_CALL_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60)

RUNS = Counter("loopdesk_runs", "Runs that ended, by their final status.", ["status"])
RUN_SECONDS = Histogram(
    "loopdesk_run_duration_seconds",
    "How long a run took from its claim to its end, by final status.",
    ["status"],
    buckets=RUN_BUCKETS,
)
MODEL_CALL_SECONDS = Histogram(
    "loopdesk_model_call_duration_seconds",
    "A streamed model call from its request to its last event (the SDK's retries included).",
    ["model"],
    buckets=MODEL_CALL_BUCKETS,
)
FIRST_TOKEN_SECONDS = Histogram(
    "loopdesk_model_time_to_first_token_seconds",
    "From a model call's request to its first content delta (text, tool input or thinking).",
    ["model"],
    buckets=FIRST_TOKEN_BUCKETS,
)
TOKENS = Counter(
    "loopdesk_model_tokens",
    "Tokens the model server reported, by model and kind (input, output, cache_read, cache_write).",
    ["model", "kind"],
)
TOOL_CALLS = Counter(
    "loopdesk_tool_calls",
    "The host's tool calls by tool and outcome: ran, failed (an error result), refused "
    "(never reached the tool: unknown, input refused, a second question) or held (waits "
    "for the person's confirmation).",
    ["tool", "outcome"],
)
HELD_ANSWERS = Counter(
    "loopdesk_held_call_answers",
    "Answers to held calls' confirmation cards: approved, declined, or dismissed (the "
    "person sent a message instead).",
    ["tool", "answer"],
)
OPEN_SOCKETS = Gauge(
    "loopdesk_open_sockets",
    "Chat websockets open now (summed over the live processes).",
    multiprocess_mode="livesum",
)
REJECTED = Counter(
    "loopdesk_rate_limited",
    "Requests refused for a limit (HTTP 429, or a socket closed with 1013), by reason.",
    ["reason"],
)

# The usage keys of the Messages API, as the `kind` label names them.
TOKEN_KINDS = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}


def run_ended(status: str, seconds: float | None = None) -> None:
    """A run's final status (and how long it ran, when the process that ran it knows)."""
    RUNS.labels(status).inc()
    if seconds is not None:
        RUN_SECONDS.labels(status).observe(seconds)


def model_call(model: str, started: float, first_token: float, usage: Mapping[str, int]) -> None:
    """A model call that streamed to its end, now: when it started and when its first
    content arrived (time.monotonic(); 0: none did), and its usage."""
    MODEL_CALL_SECONDS.labels(model).observe(time.monotonic() - started)
    if first_token:
        FIRST_TOKEN_SECONDS.labels(model).observe(first_token - started)
    for key, kind in TOKEN_KINDS.items():
        count = usage.get(key) or 0
        if count > 0:
            TOKENS.labels(model, kind).inc(count)


def tool_label(tool: str, known: bool = True) -> str:
    """A tool as the labels name it: a name the model made up is `unknown`, and an MCP
    server's tools (`mcp__server__tool`, named by whoever runs the server) are `mcp`, so
    neither a model nor a server can add labels without bound."""
    if not known:
        return "unknown"
    return "mcp" if tool.startswith("mcp__") else tool


def tool_called(tool: str, outcome: str, known: bool = True) -> None:
    TOOL_CALLS.labels(tool_label(tool, known), outcome).inc()


def held_answered(tool: str, answer: str) -> None:
    HELD_ANSWERS.labels(tool_label(tool), answer).inc()


def socket_opened() -> None:
    OPEN_SOCKETS.inc()


def socket_closed() -> None:
    OPEN_SOCKETS.dec()


def rate_limited(reason: str) -> None:
    REJECTED.labels(reason).inc()


# -- the queue, read at scrape time -------------------------------------------------------


@dataclass(frozen=True)
class QueueDepth:
    """What waits now: messages in the chats' queues and queued runs, each with the age
    of its oldest in seconds (0 when none waits)."""

    queued_messages: int
    oldest_message_seconds: float
    queued_runs: int
    oldest_run_seconds: float


class QueueCollector(Collector):
    """Reads the queue's depth and age once per scrape (`read`: one bounded query each)."""

    def __init__(self, read: Callable[[], QueueDepth]):
        self.read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = self.read()
        yield GaugeMetricFamily(
            "loopdesk_queued_messages",
            "Messages waiting in chats' queues for their run to end.",
            value=depth.queued_messages,
        )
        yield GaugeMetricFamily(
            "loopdesk_queued_message_oldest_age_seconds",
            "How long the oldest queued message has waited.",
            value=depth.oldest_message_seconds,
        )
        yield GaugeMetricFamily(
            "loopdesk_runs_queued",
            "Runs created and not yet claimed by an executor (thread pool or Dramatiq).",
            value=depth.queued_runs,
        )
        yield GaugeMetricFamily(
            "loopdesk_run_queue_oldest_age_seconds",
            "How long the oldest unclaimed run has waited.",
            value=depth.oldest_run_seconds,
        )


# -- reading them ------------------------------------------------------------------------


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def registry(extra: Iterable[Collector] = ()) -> CollectorRegistry:
    """What a scrape reads: every process's files in multiprocess mode (a registry made per
    scrape, as prometheus_client asks), else this process's own; plus `extra`."""
    if multiprocess_dir() is None:
        if not extra:
            return REGISTRY
        combined = CollectorRegistry(auto_describe=True)
        combined.register(_Everything(REGISTRY))
    else:
        combined = CollectorRegistry()
        multiprocess.MultiProcessCollector(combined)
    for collector in extra:
        combined.register(collector)
    return combined


class _Everything(Collector):
    """The default registry's metrics, inside a registry of a scrape's own."""

    def __init__(self, source: CollectorRegistry):
        self.source = source

    def collect(self) -> Iterable[Metric]:
        return self.source.collect()

    def describe(self) -> list[Metric]:
        return []


def scrape(extra: Iterable[Collector] = ()) -> tuple[bytes, str]:
    """The text exposition and its content type."""
    return generate_latest(registry(extra)), CONTENT_TYPE_LATEST


def process_ended(pid: int) -> None:
    """gunicorn's child_exit: a dead worker's live gauges (open sockets) stop counting."""
    if multiprocess_dir() is not None:
        multiprocess.mark_process_dead(pid)


def serve(address: str, extra: Iterable[Collector] = ()) -> WSGIServer | None:
    """prometheus_client's own server on `address` (host:port; empty: none), in a thread,
    without authentication: bind it where only the scraper reaches (METRICS_ADDRESS).
    Flask's server and `flask worker` start it; gunicorn's master its own (metrics_dir.py)."""
    if not address:
        return None
    host, _, port = address.rpartition(":")
    server, _thread = start_http_server(
        int(port), host.strip("[]") or "127.0.0.1", registry(tuple(extra))
    )
    return server
