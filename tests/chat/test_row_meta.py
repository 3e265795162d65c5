"""A row's meta holds only what app/row_meta.py declares for its kind.

Two ways: representative turns through the real loop (a questionnaire and an agent's
output, a tainted chat's held fetch approved, a made image, a refusal, a stop, a
compaction), whose every row is checked against its kind's TypedDict, nested card, steps
and output included; and a scan of app/ for every key a dict literal writes into a row's
meta, checked against its kind where the code names it, else against RowMeta."""

from __future__ import annotations

import ast
import json
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

import app as app_package
from app.chat.compaction import save_summary
from app.chat.models import Message
from app.kinds import RowKind
from app.row_meta import (
    META_OF_KIND,
    AgentOutput,
    Card,
    RowMeta,
    Step,
    StepsSummary,
)
from app.workspace.models import Attachment
from tests.chat.injection_kit import Site
from tests.factories import QUIZ, add_offer_and_persona, build_phase_chat, user_id_of
from tests.fake_model import Turn, api_error, text, tool_use

APP = Path(app_package.__file__).parent


def _declared(shape: type) -> frozenset[str]:
    return shape.__required_keys__ | shape.__optional_keys__


def _problems(where: str, value: object, shape: type) -> list[str]:
    """What in `value` its TypedDict `shape` does not declare, or misses."""
    if not isinstance(value, dict):
        return [f"{where}: {value!r} is not an object"]
    keys = set(value)
    problems = [f"{where}: undeclared key {key!r}" for key in sorted(keys - _declared(shape))]
    missing = shape.__required_keys__ - keys
    problems += [f"{where}: missing key {key!r}" for key in sorted(missing)]
    return problems


def _meta_problems(row: Message) -> list[str]:
    where = f"row {row.sequence} ({row.kind})"
    meta = row.meta
    problems = _problems(f"{where} meta", meta, META_OF_KIND[RowKind(row.kind)])
    if "card" in meta:
        problems += _problems(f"{where} card", meta["card"], Card)
    if "agentOutput" in meta:
        problems += _problems(f"{where} agentOutput", meta["agentOutput"], AgentOutput)
    if "steps" in meta:
        problems += _problems(f"{where} steps", meta["steps"], StepsSummary)
        for item in meta["steps"].get("items", []):
            problems += _problems(f"{where} step", item, Step)
    return problems


def _checked_rows(app, chat_id: int) -> list[Message]:
    """Every row of the chat (hidden ones too), each checked against its kind."""
    with app.extensions["database"].session() as session:
        rows = session.scalars(
            select(Message).where(Message.conversation_id == chat_id).order_by(Message.sequence)
        ).all()
        problems = [problem for row in rows for problem in _meta_problems(row)]
        session.expunge_all()
    assert problems == []
    return list(rows)


def _keys_seen(rows: list[Message], kind: RowKind) -> set[str]:
    return {key for row in rows if row.kind == kind for key in row.meta}


# --- representative turns --------------------------------------------------------------


def test_a_questionnaire_and_an_agents_output(app, chat, fake_model):
    offer_id = add_offer_and_persona(app, user_id_of(app))["offer"]
    fake_model.script(
        Turn(text("Let me look at your offers."), tool_use("list_offers", {})),
        Turn(text("Which one?"), tool_use("select_offer", {"prompt": "Which?"}, id="toolu_pick")),
    )
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Make a quiz"))["status"] == "awaiting"
    fake_model.script(
        Turn(
            text("Writing it."), tool_use("quiz", {"instructions": "A quiz", "offer_id": offer_id})
        ),
        Turn(text("```json\n" + json.dumps(QUIZ) + "\n```")),
        Turn(text("Your quiz is ready.")),
    )
    response = chat.answer(chat_id, "toolu_pick", {"offer_id": offer_id})
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"

    rows = _checked_rows(app, chat_id)
    kinds = {row.kind for row in rows}
    assert kinds == {"user", "host", "tool_result", "card", "agent_output"}
    assert {"card", "awaiting"} <= _keys_seen(rows, RowKind.CARD)
    assert "steps" in _keys_seen(rows, RowKind.HOST)
    assert "answer" in next(row.meta["card"] for row in rows if row.kind == RowKind.CARD)
    assert "outputId" in next(r.meta["agentOutput"] for r in rows if r.kind == "agent_output")


@pytest.fixture
def site():
    site = Site()
    yield site
    site.close()


@pytest.fixture
def app(make_app, fake_model):
    return make_app(anthropic_base_url=fake_model.base_url, fetch_allow_hosts=("127.0.0.1",))


def test_a_tainted_chat_and_its_held_fetch_approved(app, chat, fake_model, site):
    chat_id = chat.new_chat()
    with app.extensions["database"].session() as session:
        attachment = Attachment(
            user_id=chat.user_id,
            conversation_id=chat_id,
            filename="brief.txt",
            content_type="text/plain",
            size=5,
            data=b"brief",
            text="A brief.",
        )
        session.add(attachment)
        session.commit()
        attachment_id = attachment.id
    url = site.page("/tips", "Nothing to do.")
    fake_model.script(
        Turn(text("Reading it."), tool_use("read_attachment", {"attachment_id": attachment_id})),
        Turn(tool_use("fetch_url", {"url": url}, id="toolu_fetch")),
    )
    assert chat.wait(chat.send(chat_id, "Read my brief"))["status"] == "awaiting"
    fake_model.script("Done.")
    response = chat.answer(chat_id, "toolu_fetch", {"approved": True})
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"

    rows = _checked_rows(app, chat_id)
    assert {"files", "blocks"} <= _keys_seen(rows, RowKind.USER)
    assert "untrusted" in _keys_seen(rows, RowKind.TOOL_RESULT)
    card = next(row.meta["card"] for row in rows if row.kind == RowKind.CARD)
    assert {"arguments", "reason", "url", "executed"} <= set(card)


def test_a_made_image(app, chat, fake_model):
    ids = add_offer_and_persona(app, user_id_of(app))
    fake_model.script(
        Turn(
            text("Making it."),
            tool_use("generate_image", {"prompt": "A kitchen", "offer_id": ids["offer"]}),
        ),
        "Here it is.",
    )
    chat_id = build_phase_chat(app, chat)
    assert chat.wait(chat.send(chat_id, "Make an image"))["status"] == "completed"

    rows = _checked_rows(app, chat_id)
    output = next(row.meta["agentOutput"] for row in rows if row.kind == RowKind.AGENT_OUTPUT)
    assert output["kind"] == "image" and "assetId" in output


def test_a_refusal_a_stop_and_a_compaction(app, chat, fake_model):
    chat_id = chat.new_chat()
    fake_model.script(api_error(400, "invalid_request_error", "No."))
    assert chat.wait(chat.send(chat_id, "Hello"))["status"] == "error"
    fake_model.script(Turn(text("Too late."), delay_first=8))
    run_id = chat.send(chat_id, "Tell me everything")
    fake_model.wait_for_requests(2)
    assert chat.post(f"/api/chats/{chat_id}/stop", {}).status_code == 200
    assert chat.wait(run_id)["status"] == "cancelled"
    with app.extensions["database"].session() as session:
        assert save_summary(session, chat_id, 0, 2, "They said hello.") is not None
        session.commit()

    rows = _checked_rows(app, chat_id)
    assert "code" in _keys_seen(rows, RowKind.ERROR)
    assert {"stopped", "summary", "summarizedUpTo"} <= _keys_seen(rows, RowKind.NOTICE)


# --- RowMeta and the kinds agree --------------------------------------------------------


def test_row_meta_is_every_kinds_keys_typed_as_they_keep_them():
    everything = typing.get_type_hints(RowMeta)
    kept: set[str] = set()
    for kind, shape in META_OF_KIND.items():
        for key, hint in typing.get_type_hints(shape).items():
            kept.add(key)
            assert everything.get(key) == hint, (kind, key)
    assert set(everything) == kept
    assert set(META_OF_KIND) == set(RowKind)


# --- every key a dict literal writes into a row's meta, anywhere in app/ ---------------

KIND_OF_SHAPE = {shape.__name__: kind for kind, shape in META_OF_KIND.items()}
# Where `meta` is a visual asset's (app/workspace), not a row's.
NOT_ROWS = ("workspace",)


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _row_kind(node: ast.AST | None) -> RowKind | None:
    """`RowKind.X` as written in the code."""
    if isinstance(node, ast.Attribute) and _name(node.value) == "RowKind":
        return RowKind[node.attr]
    return None


def _literal_keys(node: ast.AST | None) -> list[str]:
    """The keys a dict display or a meta TypedDict's call writes (`**` spreads carry
    keys written elsewhere, checked there)."""
    if isinstance(node, ast.Dict):
        return [k.value for k in node.keys if isinstance(k, ast.Constant)]
    if isinstance(node, ast.Call) and _name(node.func) in KIND_OF_SHAPE:
        return [keyword.arg for keyword in node.keywords if keyword.arg]
    return []


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _entry(display: ast.Dict, name: str) -> ast.AST | None:
    for key, value in zip(display.keys, display.values, strict=True):
        if isinstance(key, ast.Constant) and key.value == name:
            return value
    return None


def _annotated_kind(node: ast.AnnAssign) -> RowKind | None:
    return KIND_OF_SHAPE.get(_name(node.annotation) or "")


def _function_meta_kind(function: ast.AST) -> RowKind | None:
    """The kind a function's `meta: XMeta = ...` names (its later `meta[...] =` are of it)."""
    for node in ast.walk(function):
        if isinstance(node, ast.AnnAssign) and _name(node.target) == "meta":
            return _annotated_kind(node)
    return None


def meta_writes(source: str, rows_only: bool = True) -> Iterator[tuple[int, RowKind | None, str]]:
    """(line, kind or None when the code does not name it, key) of every key written into
    a row's meta: by insert_message, a meta TypedDict, a shown row, and (`rows_only`: the
    module's `meta` is a row's, not an asset's) any `meta = {...}`, `x.meta = {...}` or
    `meta["key"] = ...`."""
    tree = ast.parse(source)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    kind_in: dict[int, RowKind | None] = {}
    for function in functions:  # outer ones first: a nested function's own kind wins
        kind = _function_meta_kind(function)
        kind_in.update((id(node), kind) for node in ast.walk(function))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            shape_kind = KIND_OF_SHAPE.get(_name(node.func) or "")
            if shape_kind is not None:
                yield from ((node.lineno, shape_kind, k) for k in _literal_keys(node))
            if _name(node.func) == "insert_message":
                kind = _row_kind(_keyword(node, "kind"))
                meta = _keyword(node, "meta")
                if not (isinstance(meta, ast.Call) and _name(meta.func) in KIND_OF_SHAPE):
                    yield from ((node.lineno, kind, k) for k in _literal_keys(meta))
        elif isinstance(node, ast.Dict):  # a row a tool wants shown: {"kind", "meta"}
            meta = _entry(node, "meta")
            if isinstance(meta, ast.Dict):
                kind = _row_kind(_entry(node, "kind"))
                yield from ((node.lineno, kind, k) for k in _literal_keys(meta))
        elif isinstance(node, ast.Assign | ast.AnnAssign) and rows_only:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            kind = _annotated_kind(node) if isinstance(node, ast.AnnAssign) else None
            for target in targets:
                if _name(target) == "meta" and not isinstance(node.value, ast.Call):
                    named = kind or (
                        kind_in.get(id(node)) if isinstance(target, ast.Name) else None
                    )
                    yield from ((node.lineno, named, k) for k in _literal_keys(node.value))
                elif (
                    isinstance(target, ast.Subscript)
                    and _name(target.value) == "meta"
                    and isinstance(target.slice, ast.Constant)
                ):
                    yield node.lineno, kind_in.get(id(node)), target.slice.value


def _undeclared(source: str, rows_only: bool = True) -> list[tuple[int, str]]:
    found = []
    for line, kind, key in meta_writes(source, rows_only):
        declared = _declared(META_OF_KIND[kind] if kind is not None else RowMeta)
        if key not in declared:
            found.append((line, key))
    return found


def _modules() -> Iterator[tuple[Path, str]]:
    for path in sorted(APP.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8")


def test_every_meta_key_written_in_app_is_declared_for_its_kind():
    undeclared, writes = [], []
    for path, source in _modules():
        rows_only = path.relative_to(APP).parts[0] not in NOT_ROWS
        writes += list(meta_writes(source, rows_only))
        undeclared += [(str(path.relative_to(APP)), *u) for u in _undeclared(source, rows_only)]
    assert undeclared == []
    # The scan finds the writers: each kind, named where its rows are written.
    # (A card row's meta is written onto its host row, as `row.meta = {...}`: kind None.)
    assert {kind for _, kind, _ in writes} >= (set(RowKind) - {RowKind.CARD}) | {None}
    assert len(writes) > 30


PLANTED = """
def insert_error(session):
    insert_message(session, 1, role="assistant", kind=RowKind.ERROR, meta={"code": "x", "colour": 1})
    insert_message(session, 1, role="assistant", kind=RowKind.NOTICE, meta=NoticeMeta(mood=2))

def close(row):
    row.meta = {**row.meta, "card": {}, "awaiting": None, "flavour": 3}

def user_meta():
    meta: UserMeta = {"blocks": []}
    meta["hidden"] = True
    return meta

def shown():
    return [{"kind": RowKind.AGENT_OUTPUT, "content": "", "meta": {"agentOutput": {}, "x": 4}}]

def misplaced(session):
    insert_message(session, 1, role="assistant", kind=RowKind.ERROR, meta={"card": {}})
"""


def test_the_scan_catches_an_undeclared_key_and_a_key_of_another_kind():
    found = sorted(_undeclared(PLANTED))
    assert [key for _, key in found] == ["colour", "mood", "flavour", "hidden", "x", "card"]
