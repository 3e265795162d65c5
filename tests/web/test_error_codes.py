"""Every error code the server answers with is one of app/error_codes.py, named where it is
raised; the OpenAPI document says what each means and which codes each operation answers
with, and real error answers carry the code their operation documents."""

from __future__ import annotations

import ast
import re

import pytest

from app.config import PROJECT_ROOT
from app.error_codes import MEANINGS, ErrorCode
from app.web.openapi import openapi_document
from tests.factories import add_conversation, add_token

# Where a code is handed over: (callable's name, the code's position among its arguments).
RAISERS = {"ApiError": 2, "TurnRejected": 1, "error_response": 1, "_refused": None}
# Codes no JSON API operation answers with: pages' own, or any path's.
NOT_OPERATIONS = {
    ErrorCode.CONFLICT,  # a page's attachment chip
    ErrorCode.SESSION_REQUIRED,  # the settings page's token and password actions
    ErrorCode.METHOD_NOT_ALLOWED,  # a method the path does not take
    ErrorCode.ERROR,  # any other HTTP status
}


def _raise_sites():
    """(where, the code's expression) of every call that hands over an error code."""
    for path in sorted((PROJECT_ROOT / "app").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name not in RAISERS:
                continue
            position = RAISERS[name]
            arguments = [kw.value for kw in node.keywords if kw.arg == "code"]
            if position is not None and len(node.args) > position:
                arguments.append(node.args[position])
            if position is None:  # a helper whose code comes after the ids: any argument
                arguments += node.args
            for argument in arguments:
                yield f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}", argument


def _named_codes(tree_nodes) -> set[str]:
    return {
        node.attr
        for node in tree_nodes
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "ErrorCode"
    }


def test_every_code_is_raised_by_its_name_from_the_registry():
    literal = [
        where
        for where, argument in _raise_sites()
        if isinstance(argument, ast.Constant)
        and isinstance(argument.value, str)
        and re.fullmatch(r"[A-Z][A-Z_]+", argument.value)
    ]
    assert literal == [], "a code written as a string, not ErrorCode.<NAME>"
    assert set(MEANINGS) == set(ErrorCode)
    assert all(meaning.text for meaning in MEANINGS.values())


@pytest.fixture
def document(app):
    with app.test_request_context():
        return openapi_document(app)[0]


def _listed(document) -> set[str]:
    return {
        code
        for operations in document["paths"].values()
        for operation in operations.values()
        if isinstance(operation, dict)
        for response in operation["responses"].values()
        for code in response.get("x-error-codes", [])
    }


def test_every_code_the_server_raises_is_in_the_document_with_its_meaning(document):
    schema = document["components"]["schemas"]["ErrorCode"]
    assert schema["enum"] == [str(code) for code in ErrorCode]
    for code in ErrorCode:
        assert f"`{code}`" in schema["description"]
        assert MEANINGS[code].text in schema["description"]
    body = document["components"]["schemas"]["ErrorBody"]
    assert body["properties"]["code"] == {"$ref": "#/components/schemas/ErrorCode"}
    # Every code named anywhere in app/ is listed by some operation, but the pages' own.
    named = set()
    for path in (PROJECT_ROOT / "app").rglob("*.py"):
        if path.name != "error_codes.py":
            named |= _named_codes(ast.walk(ast.parse(path.read_text())))
    assert named >= {"CARD_NOT_AWAITING", "INVALID_BODY", "NOT_FOUND", "INVALID_RULES"}
    assert named - {str(code) for code in NOT_OPERATIONS} <= _listed(document)


def test_each_error_response_lists_its_codes_and_their_meanings(document):
    loop = document["paths"]["/api/chats/{conversation_id}/loop"]["post"]["responses"]
    assert "default" not in loop  # every status an operation answers is declared
    assert loop["409"]["x-error-codes"] == ["CARD_NOT_AWAITING", "RUN_IN_FLIGHT", "QUEUE_FULL"]
    assert "INVALID_BODY" in loop["400"]["x-error-codes"]
    assert MEANINGS[ErrorCode.INVALID_BODY].text in loop["400"]["description"]
    rules = document["paths"]["/api/admin/guidelines"]["put"]["responses"]
    assert "INVALID_RULES" in rules["400"]["x-error-codes"]
    assert rules["403"]["x-error-codes"] == ["INSUFFICIENT_SCOPE", "FORBIDDEN"]
    chats = document["paths"]["/api/chats"]["get"]["responses"]
    # A list reads no body; its one 404 is a project_id that is not the person's.
    assert chats["404"]["x-error-codes"] == ["NOT_FOUND"] and "INVALID_BODY" not in str(chats)


def test_real_error_answers_carry_a_code_their_operation_documents(app, user, document):
    _, raw = add_token(app, user)
    chat = add_conversation(app, user)
    api = app.test_client()
    api.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {raw}"
    loop = f"/api/chats/{chat}/loop"
    answers = [
        ("get", "/api/chats/{conversation_id}/messages", api.get("/api/chats/999999/messages")),
        ("post", "/api/chats/{conversation_id}/loop", api.post(loop, json={"nothing": 1})),
        ("get", "/api/chats", app.test_client().get("/api/chats")),
        (
            "post",
            "/api/chats/{conversation_id}/loop",
            api.post(loop, json={"toolResponse": {"toolUseId": "toolu_gone", "result": {}}}),
        ),
    ]
    # An id past the database's INTEGER is absent for every method (never a 405).
    too_large = "/api/offers/99999999999"
    answers += [
        ("get", "/api/offers/{offer_id}", api.get(too_large)),
        ("delete", "/api/offers/{offer_id}", api.delete(too_large)),
    ]
    seen = []
    for method, path, response in answers:
        code = response.get_json()["error"]["code"]
        declared = document["paths"][path][method]["responses"][str(response.status_code)]
        assert code in declared["x-error-codes"], (path, response.status_code, code)
        seen.append((response.status_code, code))
    assert seen == [
        (404, "NOT_FOUND"),
        (400, "INVALID_BODY"),
        (401, "UNAUTHORIZED"),
        (409, "CARD_NOT_AWAITING"),
        (404, "NOT_FOUND"),
        (404, "NOT_FOUND"),
    ]
