"""Traces' tests; `printed_spans` reads what the console exporter printed (a process's
output, OTEL_TRACES_EXPORTER=console), for the tests that start real processes."""

from __future__ import annotations

import json
from pathlib import Path


def printed_spans(*logs: Path) -> list[dict]:
    """Every span the console exporter printed in these logs, as its JSON object."""
    spans, decoder = [], json.JSONDecoder()
    for log in logs:
        text, at = log.read_text(errors="replace"), 0
        while (start := text.find('{\n    "name"', at)) >= 0:
            span, at = decoder.raw_decode(text, start)
            spans.append(span)
    return spans
