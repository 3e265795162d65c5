"""A property over every route of app.url_map: whatever the body, ids, query string and
headers (within reason), no request answers 5xx. Logged in as an admin with a real chat
(rows, a run, an attachment, an offer, a persona); the sign-up and login forms as someone
logged out.

CI runs a few hundred examples (well under a minute); `make fuzz` raises FUZZ_EXAMPLES
for a long run. Sockets (/ws/) have their own tests (test_socket_limits.py)."""

from __future__ import annotations

import io
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.routing import AnyConverter, IntegerConverter

from app.chat.rows import insert_message
from tests.factories import AuthActions, add_conversation, add_offer, add_persona, add_token

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))
SKIPPED_PREFIXES = ("/static/", "/ws/")
# Ending the session would leave the rest of the run logged out.
SKIPPED_RULES = {"/logout"}
ANONYMOUS_RULES = {"/login", "/signup"}

FIELDS = [
    "message",
    "text",
    "title",
    "role",
    "company",
    "website",
    "action",
    "sequence",
    "answer",
    "dismiss",
    "starter",
    "name",
    "description",
    "price",
    "audience",
    "pains",
    "goals",
    "brand_colors",
    "offer_id",
    "email",
    "password",
    "confirm",
    "current_password",
    "new_password",
    "fact",
    "new_fact",
    "instructions",
    "is_admin",
    "credits",
    "memories",
    "toolResponse",
    "toolUseId",
    "result",
    "regenerate",
    "edit",
    "rules",
    "id",
    "enabled",
    "after",
    "branch",
    "format",
    "conversation",
    "month",
    "user",
    "agent",
    "offer",
    "next",
]

# Text of every kind: control characters, NUL, surrogates (JSON can carry them),
# right-to-left marks, markup.
TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec=None), max_size=20),
    st.sampled_from(["", " ", "0", "-1", "skip", "<script>x</script>", "\x00", "%00", "ab\ud800"]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)
NUMBERS = st.one_of(
    st.integers(min_value=-3, max_value=12),
    st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**30, -(2**63)]),
)
KEYS = st.one_of(st.sampled_from(FIELDS), st.text(max_size=10))
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, st.floats(allow_nan=True), TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=5)
    ),
    max_leaves=12,
)
QUERY_KEYS = st.sampled_from(["after", "conversation", "user", "offer", "month", "agent", "next"])
VALUES = st.one_of(TEXT, NUMBERS.map(str))
ID_TEXT = st.one_of(NUMBERS.map(str), st.sampled_from(["abc", "1.5", "%20", "00001"]))


@pytest.fixture
def world(make_app):
    app = make_app(
        model_provider="demo",
        rate_limit_messages="100000 per minute",
        rate_limit_model_work="100000 per minute",
        pdf_extract_seconds=5,
    )
    client = app.test_client()
    auth = AuthActions(app, client)
    admin_id = auth.create("ada@example.com", admin=True)
    auth.login("ada@example.com")
    chat = add_conversation(app, admin_id, "A real chat")
    with app.extensions["database"].session() as session:
        for n in range(1, 4):
            insert_message(
                session,
                chat,
                role="user" if n % 2 else "assistant",
                kind="user" if n % 2 else "host",
                content=f"row {n}",
                meta={"blocks": [{"type": "text", "text": f"row {n}"}]},
            )
        session.commit()
    offer = add_offer(app, admin_id, "An offer")
    add_persona(app, admin_id, "A persona", offer_id=offer)
    add_token(app, admin_id)
    anonymous = app.test_client()
    return {"app": app, "client": client, "auth": auth, "chat": chat, "anonymous": anonymous}


def _routes(app) -> list:
    rules = []
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith(SKIPPED_PREFIXES) or rule.rule in SKIPPED_RULES:
            continue
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            rules.append((rule, method))
    return sorted(rules, key=lambda item: (item[0].rule, item[1]))


@st.composite
def _path(draw, rule, chat_id: int) -> str:
    values = {}
    for name, converter in rule._converters.items():
        if isinstance(converter, AnyConverter):
            values[name] = draw(st.sampled_from(sorted(converter.items)))
        elif isinstance(converter, IntegerConverter) and rule.rule.endswith("/delete"):
            values[name] = draw(ID_TEXT)  # the real chat stays for the other examples
        elif isinstance(converter, IntegerConverter):
            values[name] = draw(st.one_of(st.just(chat_id), ID_TEXT))
        else:
            values[name] = draw(st.one_of(st.sampled_from(["toolu_x", "x"]), st.text(max_size=12)))
    path = rule.rule
    for name, value in values.items():
        path = _replace_argument(path, name, str(value))
    return path


def _replace_argument(path: str, name: str, value: str) -> str:
    from urllib.parse import quote

    start = path.index("<")
    while True:
        end = path.index(">", start)
        if path[start + 1 : end].split(":")[-1] == name:
            return path[:start] + quote(_raw(value), safe="") + path[end + 1 :]
        start = path.index("<", end)


FILE_BODIES = st.one_of(
    st.binary(max_size=200),
    st.binary(max_size=200).map(lambda data: b"%PDF-1.4\n" + data),
    st.sampled_from([b"hello", b"\x89PNG\r\n\x1a\n" + b"\x00" * 20, b"GIF89a"]),
)
CONTENT_TYPES = st.sampled_from(
    ["text/plain", "application/pdf", "image/png", "application/octet-stream", "", "x/y"]
)


@st.composite
def _request(draw, world) -> dict:
    app = world["app"]
    rule, method = draw(st.sampled_from(_routes(app)))
    path = draw(_path(rule, world["chat"]))
    query = draw(st.dictionaries(st.one_of(QUERY_KEYS, KEYS), VALUES, max_size=3))
    headers = {}
    if draw(st.booleans()):
        headers["HX-Request"] = "true"
    headers["Accept"] = draw(st.sampled_from(["text/html", "application/json", "*/*"]))
    anonymous = rule.rule in ANONYMOUS_RULES
    request = {"method": method, "path": path, "query": query, "headers": headers}
    request["anonymous"] = anonymous
    if method == "GET":
        return request
    if not anonymous:
        headers["X-CSRFToken"] = world["auth"].csrf
    if rule.rule.startswith("/api/") and draw(st.integers(0, 9)) > 0:
        body = draw(st.one_of(JSON, st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=4)))
        request["json"] = body
        return request
    form = draw(st.dictionaries(KEYS, VALUES, max_size=6))
    if "attachments" in rule.rule and draw(st.booleans()):
        data = draw(FILE_BODIES)
        name = draw(st.one_of(st.just("notes.txt"), st.just("doc.pdf"), st.text(max_size=12)))
        form["file"] = (io.BytesIO(data), name, draw(CONTENT_TYPES))
    request["form"] = form
    return request


def _raw(value: str) -> bytes:
    """The bytes a client could send for `value`, lone surrogates included."""
    return value.encode("utf-8", "surrogatepass")


def _urlencoded(fields: dict) -> bytes:
    from urllib.parse import urlencode

    return urlencode([(_raw(k), _raw(v)) for k, v in fields.items()]).encode()


def _send(world, request):
    client = world["anonymous"] if request["anonymous"] else world["client"]
    headers = dict(request["headers"])
    kwargs = {"query_string": _urlencoded(request["query"]).decode("ascii")}
    if "json" in request:
        import json

        # Serialized here: lone surrogates travel as JSON's \ud800 escapes.
        kwargs["data"] = json.dumps(request["json"])
        headers["Content-Type"] = "application/json"
    elif "form" in request:
        form = dict(request["form"])
        if request["anonymous"]:
            from tests.web.helpers import anonymous_csrf

            form["csrf_token"] = anonymous_csrf(client)
        else:
            form["csrf_token"] = world["auth"].csrf
        if "file" in form:
            # multipart: werkzeug's encoder wants text it can encode.
            kwargs["data"] = {
                _raw(k).decode("utf-8", "replace"): (
                    v if k == "file" else _raw(v).decode("utf-8", "replace")
                )
                for k, v in form.items()
            }
        else:
            kwargs["data"] = _urlencoded(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
    return client.open(request["path"], method=request["method"], headers=headers, **kwargs)


def test_no_route_answers_5xx_to_any_input(world):
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(request=_request(world))
    def no_5xx(request):
        response = _send(world, request)
        assert response.status_code < 500, (
            f"{request['method']} {request['path']} -> {response.status_code}: "
            f"{response.get_data(as_text=True)[:300]}"
        )

    no_5xx()
