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
from typing import Any

from apispec import APISpec
from flask import Blueprint, Flask, current_app, jsonify, render_template
from pydantic import BaseModel
from wtforms import BooleanField, SelectField
from wtforms.validators import DataRequired, Length

from app.config import PROJECT_ROOT
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
            "`{error: {code, message, field?}}`; see docs/CONTRACT.md."
        },
        security=[{"bearer": []}],
    )
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
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
            operations[method.lower()] = _operation(spec, declared[method], operation_id)
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


def _operation(spec: APISpec, operation: Operation, operation_id: str) -> dict:
    success: dict[str, Any] = {"description": operation.summary}
    if operation.response is not None:
        success["content"] = {"application/json": {"schema": _register(spec, operation.response)}}
    elif operation.status != 204:
        success["content"] = {operation.media_type: {"schema": _raw_schema(operation)}}
    for media_type, model in operation.also.items():
        success.setdefault("content", {})[media_type] = {"schema": _register(spec, model)}
    result = {
        "summary": operation.summary,
        "operationId": operation_id,
        "responses": {
            str(operation.status): success,
            "default": {
                "description": "An error: 4xx for what was sent, 5xx for what went wrong here",
                "content": {"application/json": {"schema": _ref("ErrorOut")}},
            },
        },
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


def _register(spec: APISpec, model: type[BaseModel], mode: str = "serialization") -> dict:
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
    return render_template("api_docs.html", spec=spec)


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
