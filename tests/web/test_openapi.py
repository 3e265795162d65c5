"""The OpenAPI document: generated from the routes, covering every JSON route, served and
rendered; and Schemathesis, from its generated requests, finds no 5xx and no answer
that differs from its declared shape."""

from __future__ import annotations

import os
import re

import pytest
import schemathesis

# Imported (and so rewritten by pytest, which parses their source) while the tests are
# collected, when no other thread runs: Python 3.11's AST constructor keeps its recursion
# depth per interpreter, and a parse beside an import compiling in another thread (a model
# client made in the background) failed with "AST constructor recursion depth mismatch".
import schemathesis.specs.openapi.schemas  # noqa: F401
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app.web.openapi import openapi_document
from tests.factories import add_conversation, add_offer, add_persona, add_token, add_user

# CI runs a short pass, the same examples every time (a landing is not held up by a case
# no one has seen before); `make fuzz` a long one, drawn afresh on each run.
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "12"))
EXPLORING = "SCHEMATHESIS_EXAMPLES" in os.environ


def test_every_json_route_is_in_the_document(app):
    with app.test_request_context():
        document, undocumented = openapi_document(app)
    assert undocumented == []
    assert document["openapi"] == "3.1.0"
    paths = document["paths"]
    for path in ("/api/offers/{offer_id}", "/api/search", "/api/chats/{conversation_id}/loop"):
        assert path in paths
    assert set(paths["/api/offers/{offer_id}"]) >= {"get", "patch", "delete"}
    body = paths["/api/offers"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["name"]  # from the page's form
    assert body["properties"]["name"]["maxLength"] == 120


def test_the_document_is_served_and_rendered_for_people(client):
    served = client.get("/api/openapi.json")
    assert served.status_code == 200 and served.get_json()["info"]["title"] == "Loopdesk API"
    page = client.get("/api/docs")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "/api/offers/{offer_id}" in html and "Create an offer" in html
    assert 'href="/api/docs/websocket"' in html
    # Each operation's error codes, and what every code means.
    assert "409: CARD_NOT_AWAITING, RUN_IN_FLIGHT, QUEUE_FULL" in html
    assert "<dt><code>INVALID_RULES</code></dt>" in html


def test_the_websocket_is_described_for_people_from_the_contract(client):
    """/api/docs/websocket is docs/CONTRACT.md's own section: every frame type of the
    contract's table, the timeline's detail and the refusals' reasons, as HTML."""
    from app.web.openapi import websocket_section
    from app.web.sockets import BAD_TOKEN, NO_CREDENTIALS, NO_SUCH_CHAT

    page = client.get("/api/docs/websocket")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    frame_types = re.findall(r"^\| `(\w+)` \|", websocket_section(), re.M)
    assert {"textDelta", "timeline", "message", "done", "more"} <= set(frame_types)
    assert all(f"<code>{kind}</code>" in html for kind in frame_types)
    assert "detail?" in html and "<table>" in html
    for reason in (
        BAD_TOKEN,
        NO_SUCH_CHAT,
        NO_CREDENTIALS.replace("<", "&lt;").replace(">", "&gt;"),
    ):
        assert reason in html


@pytest.fixture
def api_schema(make_app, fake_model):
    app = make_app(anthropic_base_url=fake_model.base_url)
    user = add_user(app, "ada@example.com")
    offer = add_offer(app, user, "Ada's offer")
    add_persona(app, user, "Ada's buyer", offer_id=offer)
    add_conversation(app, user, "Ada's chat")
    _, raw = add_token(app, user, "schemathesis")
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    schema.config.headers = {"Authorization": f"Bearer {raw}"}
    # A NUL byte is refused before any view, everywhere (docs/CONTRACT.md "## HTTP").
    schema.config.generation.update(allow_x00=False)
    # Too large is 413, as the document says (a message over MAX_MESSAGE_CHARS).
    rejection = schema.config.checks.negative_data_rejection
    rejection.expected_statuses = [*rejection.expected_statuses, "413"]
    return schema


def test_generated_requests_pass_every_default_check(api_schema):
    """Every operation, one after the other (schemathesis's pytest fixture loader does not
    work with this pytest), with data that fits the document and data that does not, under
    all of Schemathesis's default checks (no 5xx, declared status codes, content types,
    headers and shapes, refused what the document refuses, accepted what it accepts, auth
    enforced), and every error's code one its operation lists for that status; each
    failure names its operation."""
    failures = []
    for loaded in api_schema.get_all_operations():
        operation = loaded.ok()
        try:
            _fuzzed(operation)()
        except (Exception, BaseExceptionGroup) as failure:  # every operation runs
            failures.append(f"{operation.label}: {failure}")
    assert not failures, "\n\n".join(failures)


def _fuzzed(operation):
    """A Hypothesis test of one operation, positive and negative cases alike."""
    # A file's kind is in its name and bytes, which no schema can say: random bytes are
    # refused (400 ATTACHMENT_REFUSED, declared); every other check applies.
    # Likewise an MCP server is added only when a server at that address answers as MCP,
    # and a chat picks a model only when an admin listed it (400 UNKNOWN_MODEL, declared).
    # And a preset names a model of the catalog and tool groups of the registry, under a name
    # not yet taken: data the document cannot list (400 PRESET_REFUSED, declared).
    # A schedule's cron must fire, and its phrase and time zone be ones the server reads
    # (400 INVALID_SCHEDULE, UNKNOWN_TIME_ZONE, declared; `make fuzz` found a chat of the
    # person's given a random phrase).
    method = operation.method.upper()
    refused_by_the_world = (
        operation.path.endswith("/attachments")
        or (operation.path.endswith("/mcp-servers") and method == "POST")
        or (operation.path == "/api/chats/{conversation_id}" and method == "PATCH")
        or (operation.path.startswith("/api/presets") and method != "GET")
        or (operation.path.endswith("/schedules") and method == "POST")
    )
    excluded = [positive_data_acceptance] if refused_by_the_world else []
    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @given(case=cases)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=not EXPLORING,
    )
    def check(case):
        case.call_and_validate(excluded_checks=excluded, additional_checks=[documented_error_code])

    return check


def documented_error_code(ctx, response, case):
    """An error's `code` is one the operation's response for its status lists (the
    default checks hold its shape to ErrorOut and its status to the declared ones)."""
    declared = case.operation.definition.raw["responses"].get(str(response.status_code))
    if response.status_code < 400 or declared is None:
        return
    code = response.json()["error"]["code"]
    if code not in declared["x-error-codes"]:
        raise AssertionError(
            f"{response.status_code} {code} is not among {declared['x-error-codes']}"
        )
