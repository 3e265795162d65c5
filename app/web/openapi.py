"""The OpenAPI 3.1 document of the JSON API, generated from the routes themselves.

Each `/api/` view declares its operation next to its route with `@documented(...)`: a
summary, the response shape (a pydantic model from app/web/shapes.py, the same one that
serializes it), the body (a WTForms form, the same one that validates it, or a pydantic
model) and its query parameters. apispec assembles them with the Flask URL rules into
the document served at `/api/openapi.json`; `/api/docs` renders it for people.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from apispec import APISpec
from flask import Blueprint, Flask, current_app, jsonify, render_template
from pydantic import BaseModel
from wtforms import BooleanField, SelectField
from wtforms.validators import DataRequired, Length

from app.config import PROJECT_ROOT
from app.error_codes import MEANINGS, ErrorCode
from app.web.shapes import NOT_BLANK, ErrorOut

bp = Blueprint("openapi", __name__)

MAX_ID = 2**31 - 1  # ids are INTEGER columns on PostgreSQL
# A multipart upload's body, as the attachment routes take it.
UPLOAD = {
    "multipart/form-data": {
        "schema": {
            "type": "object",
            "properties": {
                "file": {
                    "type": "string",
                    "format": "binary",
                    "contentMediaType": "application/octet-stream",
                }
            },
            "required": ["file"],
        }
    }
}


def digits(most: int, description: str) -> dict:
    """A cursor: 1 to `most` ASCII digits. The end is a lookahead, not `$`, so the pattern
    means the same in every regex dialect (Python's `$` takes a trailing newline)."""
    return {
        "type": "string",
        "pattern": rf"^[0-9]{{1,{most}}}(?![\s\S])",
        "description": description,
    }


_CONVERTER = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")


@dataclass(frozen=True)
class Param:
    name: str
    schema: dict[str, Any]
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class Operation:
    summary: str
    response: type[BaseModel] | None = None
    status: int = 200
    media_type: str = "application/json"
    also: dict[str, type[BaseModel]] = field(default_factory=dict)  # other media types
    body: Any = None  # a WTForms form class, or a pydantic model
    partial: bool = False  # a PATCH: every field of the body may be left out
    body_required: bool = True
    query: tuple[Param, ...] = field(default_factory=tuple)
    description: str = ""
    # The error codes only this operation answers with; those every operation of its kind
    # can answer with (`error_codes`) need not be named.
    errors: tuple[ErrorCode, ...] = ()


def documented(method: str, summary: str, **options) -> Any:
    """Declare the operation `method` of the view below (it may serve several)."""

    def mark(view):
        operations = dict(getattr(view, "openapi", {}))
        operations[method.upper()] = Operation(summary, **options)
        view.openapi = operations
        return view

    return mark


def form_schema(form_class, partial: bool = False) -> dict:
    """A JSON object schema from a WTForms form: its fields, their lengths and what is
    required. A form may override a field's JSON shape in `api_shapes`."""
    overrides = getattr(form_class, "api_shapes", {})
    form = form_class(formdata=None, meta={"csrf": False})
    properties, required = {}, []
    for item in form:
        if item.name == "csrf_token":
            continue
        schema = dict(overrides.get(item.name) or _field_schema(item))
        schema.setdefault("description", str(item.label.text))
        properties[item.name] = schema
        if any(isinstance(v, DataRequired) for v in item.validators) and not partial:
            required.append(item.name)
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _field_schema(item) -> dict:
    if isinstance(item, BooleanField):
        return {"type": "boolean"}
    if isinstance(item, SelectField) and item.coerce is int:
        return {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_ID}
    schema: dict[str, Any] = {"type": "string"}
    for validator in item.validators:
        if isinstance(validator, Length):
            if validator.max and validator.max > 0:
                schema["maxLength"] = validator.max
            if validator.min and validator.min > 0:
                schema["minLength"] = validator.min
        if isinstance(validator, DataRequired):
            schema["pattern"] = NOT_BLANK  # blank text is refused like a missing field
    return schema


def openapi_document(app: Flask) -> tuple[dict, list[str]]:
    """The document, and the `/api/` operations that declare nothing (a test keeps this
    list empty)."""
    spec = APISpec(
        title="Loopdesk API",
        version="1",
        openapi_version="3.1.0",
        info={
            "description": "Chats, memory, search, export and the workspace. Send "
            "`Authorization: Bearer <token>` (settings page). Errors are "
            "`{error: {code, message, field?}}`: each operation's responses list the codes "
            "it answers with (also as `x-error-codes`), and the `ErrorCode` schema says what "
            "every code means; see docs/CONTRACT.md."
        },
        security=[{"bearer": []}],
    )
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    spec.components.schema("ErrorCode", error_code_schema())
    _register(spec, ErrorOut)
    undocumented = []
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if not rule.rule.startswith("/api/") or rule.endpoint.startswith("openapi."):
            continue
        declared = getattr(app.view_functions[rule.endpoint], "openapi", {})
        path, parameters = _path(rule.rule)
        operations = {}
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            if method not in declared:
                undocumented.append(f"{method} {rule.rule}")
                continue
            operation_id = f"{rule.endpoint.replace('.', '_')}_{method.lower()}"
            operations[method.lower()] = _operation(
                spec,
                declared[method],
                operation_id,
                error_codes(declared[method], method, rule.rule),
            )
        if operations:
            spec.path(path=path, operations=operations, parameters=parameters)
    return spec.to_dict(), undocumented


def _path(rule: str) -> tuple[str, list[dict]]:
    parameters = []

    def placeholder(match: re.Match) -> str:
        converter, name = match.group(1) or "default", match.group(2)
        schema = (
            {"type": "integer", "minimum": 0, "maximum": MAX_ID}
            if converter == "int"
            else {"type": "string"}
        )
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
        return "{" + name + "}"

    return _CONVERTER.sub(placeholder, rule), parameters


def error_code_schema() -> dict:
    """Every code, with what it means: in the description for people, and as
    `x-enum-descriptions` (the enum's order) for generators that read it."""
    codes = list(ErrorCode)
    lines = [f"- `{code}` ({_statuses(code)}): {MEANINGS[code].text}" for code in codes]
    return {
        "type": "string",
        "enum": [str(code) for code in codes],
        "description": "What went wrong, stable for scripts:\n\n" + "\n".join(lines),
        "x-enum-descriptions": [MEANINGS[code].text for code in codes],
    }


def _statuses(code: ErrorCode) -> str:
    return ", ".join(str(status) for status in MEANINGS[code].statuses) or "any other status"


# What every operation of a kind can answer, whatever its view does.
EVERY_OPERATION = (
    ErrorCode.INVALID_INPUT,  # a refused character in the address (app/web/input_gate.py)
    ErrorCode.INVALID_JSON,  # the same, on a request sent as JSON
    ErrorCode.UNAUTHORIZED,
    ErrorCode.INSUFFICIENT_SCOPE,
    ErrorCode.INTERNAL,
)
CHANGES = (ErrorCode.CSRF_FAILED, ErrorCode.TOO_LARGE)  # POST, PUT, PATCH, DELETE
WITH_JSON_BODY = (ErrorCode.UNSUPPORTED_MEDIA_TYPE, ErrorCode.INVALID_FIELD)
WITH_UPLOAD = (ErrorCode.BAD_REQUEST, ErrorCode.ATTACHMENT_REFUSED)


def error_codes(operation: Operation, method: str, rule: str) -> tuple[ErrorCode, ...]:
    """The codes `method` on `rule` can answer with: those of its kind (the method, the
    path's ids, its body and query, admin-only), then its own (`Operation.errors`)."""
    codes = list(EVERY_OPERATION)
    if method in {"POST", "PUT", "PATCH", "DELETE"}:
        codes += CHANGES
    if "<" in rule:
        codes.append(ErrorCode.NOT_FOUND)  # an id that is not one of yours
    if rule.startswith("/api/admin/"):
        codes.append(ErrorCode.FORBIDDEN)
    if operation.query:
        codes.append(ErrorCode.INVALID_FIELD)
    if any(param.name == "project_id" for param in operation.query):
        codes.append(ErrorCode.NOT_FOUND)  # a project of which the caller is no member
    if operation.body is UPLOAD:
        codes += WITH_UPLOAD
    elif operation.body is not None:
        codes += WITH_JSON_BODY
        if _names_ids(operation.body):
            codes.append(ErrorCode.NOT_FOUND)  # an id in the body that is not one of yours
    codes += operation.errors
    return tuple(dict.fromkeys(codes))


def _names_ids(body: Any) -> bool:
    """A form with a choice of one's own things (an offer, a persona) by id."""
    if isinstance(body, type) and issubclass(body, BaseModel):
        return False
    form = body(formdata=None, meta={"csrf": False})
    return any(isinstance(item, SelectField) and item.coerce is int for item in form)


def _error_responses(codes: tuple[ErrorCode, ...]) -> dict[str, dict]:
    """One response per status: the codes it comes with and what each means."""
    by_status: dict[int, list[ErrorCode]] = {}
    for code in codes:
        for status in MEANINGS[code].statuses:
            by_status.setdefault(status, []).append(code)
    return {
        str(status): {
            "description": "\n".join(
                f"- `{code}`: {MEANINGS[code].text}" for code in by_status[status]
            ),
            "content": {"application/json": {"schema": _ref("ErrorOut")}},
            "x-error-codes": [str(code) for code in by_status[status]],
        }
        for status in sorted(by_status)
    }


def _operation(
    spec: APISpec, operation: Operation, operation_id: str, codes: tuple[ErrorCode, ...]
) -> dict:
    success: dict[str, Any] = {"description": operation.summary}
    if operation.response is not None:
        success["content"] = {"application/json": {"schema": _register(spec, operation.response)}}
    elif operation.status != 204:
        success["content"] = {operation.media_type: {"schema": _raw_schema(operation)}}
    for media_type, model in operation.also.items():
        success.setdefault("content", {})[media_type] = {"schema": _register(spec, model)}
    result: dict[str, Any] = {
        "summary": operation.summary,
        "operationId": operation_id,
        "responses": {str(operation.status): success, **_error_responses(codes)},
    }
    if operation.description:
        result["description"] = operation.description
    if operation.query:
        result["parameters"] = [
            {
                "name": param.name,
                "in": "query",
                "required": param.required,
                "schema": param.schema,
                "description": param.description,
            }
            for param in operation.query
        ]
    if operation.body is not None:
        result["requestBody"] = {
            "required": operation.body_required,
            "content": _body_content(spec, operation),
        }
    return result


def _raw_schema(operation: Operation) -> dict:
    if operation.media_type.startswith("text/"):
        return {"type": "string"}
    # Bytes: `format: binary` for generated clients, contentMediaType for OpenAPI 3.1.
    return {"type": "string", "format": "binary", "contentMediaType": operation.media_type}


def _body_content(spec: APISpec, operation: Operation) -> dict:
    body = operation.body
    if isinstance(body, dict):
        return body  # a content map as is (a multipart upload)
    if isinstance(body, type) and issubclass(body, BaseModel):
        return {"application/json": {"schema": _register(spec, body, "validation")}}
    return {"application/json": {"schema": form_schema(body, operation.partial)}}


def _register(
    spec: APISpec,
    model: type[BaseModel],
    mode: Literal["validation", "serialization"] = "serialization",
) -> dict[str, Any]:
    """A response's model (as it serializes) or a body's (as it parses)."""
    name = model.__name__
    if name not in spec.components.schemas:
        schema = model.model_json_schema(mode=mode, ref_template="#/components/schemas/{model}")
        for definition, value in schema.pop("$defs", {}).items():
            if definition not in spec.components.schemas:
                spec.components.schema(definition, value)
        spec.components.schema(name, schema)
    return _ref(name)


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


@bp.get("/api/openapi.json")
def document():
    """Public: it says what the API is, not what anyone has."""
    spec, _ = openapi_document(current_app)
    return jsonify(spec)


@bp.get("/api/docs")
def docs_page():
    """The OpenAPI document rendered for people."""
    spec, _ = openapi_document(current_app)
    meanings = {str(code): meaning.text for code, meaning in MEANINGS.items()}
    return render_template("api_docs.html", spec=spec, meanings=meanings)


@bp.get("/api/docs/websocket")
def websocket_docs_page():
    """The chat socket described for people: docs/CONTRACT.md's own section."""
    from app.web.markdown import render_markdown

    return render_template("api_websocket.html", section=render_markdown(websocket_section()))


def websocket_section() -> str:
    """docs/CONTRACT.md's "## Websocket", without its heading: one text for the contract
    and for the page, so the two cannot disagree."""
    contract = (PROJECT_ROOT / "docs" / "CONTRACT.md").read_text()
    start = contract.index(WEBSOCKET_HEADING) + len(WEBSOCKET_HEADING)
    end = contract.find("\n## ", start)
    return contract[start : end if end != -1 else None].strip()


WEBSOCKET_HEADING = "\n## Websocket\n"
