"""The context gauge (app/chat/context_gauge.py) for the web: one cache per app, shared by
every tab and request, and the gauge as the socket pushes it (after a run ends, after a
compaction). Its page global and JSON route are app/web/context_api.py's."""

from __future__ import annotations

from flask import current_app, render_template

from app import events as ev
from app.chat.context_gauge import Gauge, GaugeCache, context_gauge
from app.kinds import RowKind
from app.web.offload import off_the_loop


def gauge_of(conversation_id: int) -> Gauge | None:
    """The chat's gauge. Drafting the next request costs what a run's first read does
    (a long history is parsed and measured): under gevent it runs off the serving loop."""
    cache = current_app.extensions.setdefault("context_gauges", GaugeCache())
    services = current_app.extensions["services"]
    return off_the_loop(context_gauge, services, conversation_id, cache)


def changes_context(batch: list) -> bool:
    """Whether the batch may change the gauge: a run ended (its rows and usage are in), a
    compaction's notice arrived, or another branch is shown."""
    return any(
        isinstance(event, ev.Done | ev.BranchChanged)
        or (
            isinstance(event, ev.RowPersisted)
            and event.row.get("kind") == RowKind.NOTICE
            and "summary" in event.row
        )
        for event in batch
    )


def gauge_frame(conversation_id: int) -> str:
    """The gauge as a socket frame, swapped out-of-band by its id ("" once the chat is gone)."""
    gauge = gauge_of(conversation_id)
    if gauge is None:
        return ""
    return render_template("chat/_context_gauge.html", gauge=gauge, swap_oob=True)
