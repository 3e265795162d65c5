"""`GET /metrics`: Prometheus' text format (docs/observability.md, "Metrics"), for an
admin: a token with the `admin` scope (app/web/scopes.py) or an admin's session. Without
either it answers 401, to anyone else 403, always in JSON: whoever scrapes is a script.
METRICS_ADDRESS serves the same metrics without authentication on an address of its own.

What the processes record comes from app/telemetry/metrics.py; the queue's depth and age
are read from the database at each scrape (two aggregate reads)."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify
from flask_login import current_user

from app.chat.queue import queue_collector
from app.error_codes import ErrorCode
from app.telemetry import metrics

bp = Blueprint("metrics", __name__)


@bp.get("/metrics")
def scrape():
    """Prometheus metrics (text format), for an admin's token (`admin` scope) or session."""
    if not current_user.is_authenticated:
        refusal = jsonify(
            {"error": {"code": ErrorCode.UNAUTHORIZED, "message": "Send an admin's token."}}
        )
        return refusal, 401, {"WWW-Authenticate": 'Bearer realm="loopdesk"'}
    if not current_user.is_admin:
        return jsonify(
            {"error": {"code": ErrorCode.FORBIDDEN, "message": "Only an admin may read metrics."}}
        ), 403
    database = current_app.extensions["services"].database
    body, content_type = metrics.scrape([queue_collector(database)])
    return Response(body, content_type=content_type, headers={"Cache-Control": "no-store"})
