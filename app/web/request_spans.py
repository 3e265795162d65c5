"""A server span per request, and per socket for its whole life (a flask-sock route is one
long request): `GET /ws/chats/<int:conversation_id>` and the like, named by the route's
rule, never by its values. Registered only when tracing is on (app/telemetry/tracing.py).

A path whose rule takes anything but ids (a share link's token, a mailed link's) is left
out of `url.path`: the rule in `http.route` says which page it was. No query string, header or
cookie is ever recorded; an incoming `traceparent` is continued."""

from __future__ import annotations

from flask import Flask, Response, g, request

from app.telemetry import tracing


def init_app(app: Flask) -> None:
    if not tracing.enabled():
        return
    # First of all the hooks, so a request another hook refuses has its span too.
    app.before_request_funcs.setdefault(None, []).insert(0, _start)
    app.after_request(_status)
    app.teardown_request(_end)


def _start() -> None:
    g.request_span = tracing.start_request(request.method, _safe_path(), request.headers)


def _safe_path() -> str | None:
    rule = request.url_rule
    values = (request.view_args or {}).values()
    if rule is None or not all(isinstance(v, int) for v in values):
        return None  # only ids in it, never a token
    return request.path


def _status(response: Response) -> Response:
    g.request_status = response.status_code
    return response


def _end(error: BaseException | None) -> None:
    started = g.pop("request_span", None)
    if started is None:
        return
    rule = request.url_rule.rule if request.url_rule is not None else None
    tracing.end_request(started, rule, g.pop("request_status", None), error)
