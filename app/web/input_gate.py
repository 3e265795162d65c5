"""The input gate: what no route ever has to handle.

Before any view runs, the query string, form fields, uploaded file names and JSON bodies
are checked for text that no database stores alike (a NUL byte: PostgreSQL refuses it; a
lone surrogate: neither SQLite nor PostgreSQL can encode it) and for JSON nested deeper
than `MAX_JSON_DEPTH`. Such a request answers 400 `INVALID_INPUT` (or `INVALID_JSON`)
whatever the route. Ids in URLs are bounded by the `int` converter below: one at or above
2^63 (2^31 on PostgreSQL: no id can be that large) does not match, so it answers 404 like any id that
is not yours. The socket's messages go through `load_json` too (app/web/sockets.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from flask import Flask, current_app, request
from werkzeug.routing import IntegerConverter

from app.error_codes import ErrorCode
from app.web.errors import ApiError

# The largest id a table can hold: ids are INTEGER, 32 bits on PostgreSQL, 64 on SQLite.
MAX_ID = {"postgresql": 2**31 - 1, "sqlite": 2**63 - 1}
# A NUL, or a UTF-16 surrogate standing alone (only JSON's \ud800 escapes can make one:
# werkzeug decodes forms and URLs as UTF-8, replacing what is not).
FORBIDDEN = re.compile("[\x00\ud800-\udfff]")


class InputRefused(ValueError):
    """Why a body or a socket message is refused, in words for the person."""


def max_id(dialect: str) -> int:
    return MAX_ID.get(dialect, 2**31 - 1)


def id_from_text(raw: str | None) -> int | None:
    """A whole number (ASCII digits) that an id or sequence column of this database can
    hold, or None: what a query string's `?after=` or `?conversation=` may be."""
    raw = raw or ""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19:
        return None
    value = int(raw)
    largest = max_id(current_app.extensions["database"].engine.dialect.name)
    return value if value <= largest else None


def bounded_int_converter(largest: int) -> type[IntegerConverter]:
    """Flask's `int`, limited to what an id column of this database can hold."""

    class BoundedIntConverter(IntegerConverter):
        def __init__(self, map, *args, **kwargs):
            kwargs.setdefault("max", largest)
            super().__init__(map, *args, **kwargs)

    return BoundedIntConverter


def check_text(value: str, where: str) -> None:
    if FORBIDDEN.search(value):
        raise InputRefused(f"{where} contains a NUL byte or invalid Unicode.")


def check_document(value: Any, max_depth: int, where: str = "The body") -> None:
    """Every string (keys too) clean, and no deeper than `max_depth` arrays/objects."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth > max_depth:
                raise InputRefused(f"{where} is nested deeper than {max_depth} levels.")
            for key, child in item.items():
                check_text(key, where)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            if depth > max_depth:
                raise InputRefused(f"{where} is nested deeper than {max_depth} levels.")
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            check_text(item, where)


def load_json(raw: str | bytes, max_depth: int, where: str = "The body") -> Any:
    """Parse JSON and check it; raises InputRefused (for bad input of any kind)."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputRefused(f"{where} is not UTF-8.") from None
    try:
        value = json.loads(raw)
    except RecursionError:
        # Nested deeper than the parser's own stack allows (thousands of levels).
        raise InputRefused(f"{where} is nested deeper than {max_depth} levels.") from None
    except ValueError:
        raise InputRefused(f"{where} is not valid JSON.") from None
    check_document(value, max_depth, where)
    return value


def check_request() -> None:
    """The before_request hook (registered first, so even the CSRF check reads clean
    form fields)."""
    try:
        for name, value in request.args.items(multi=True):
            check_text(name, "The address")
            check_text(value, "The address")
        if request.method in {"POST", "PUT", "PATCH", "DELETE"}:
            _check_body()
    except InputRefused as refused:
        code = ErrorCode.INVALID_JSON if request.is_json else ErrorCode.INVALID_INPUT
        raise ApiError(400, str(refused), code) from None


def _check_body() -> None:
    if request.is_json:
        raw = request.get_data(cache=True)
        if not raw:
            return
        value = load_json(raw, current_app.config["LOOPDESK"].max_json_depth)
        # Views read the checked document: Flask's own parser is never handed the raw body.
        request._cached_json = (value, value)
        return
    # A multipart part whose name werkzeug could not read has the name None.
    for name, value in request.form.items(multi=True):
        check_text(name or "", "A form field")
        check_text(value, "A form field")
    for name, upload in request.files.items(multi=True):
        check_text(name or "", "A form field")
        check_text(upload.filename or "", "A file name")


def init_app(app: Flask) -> None:
    dialect = app.extensions["database"].engine.dialect.name
    app.url_map.converters["int"] = bounded_int_converter(max_id(dialect))
    app.before_request(check_request)
