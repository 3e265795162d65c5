"""The caller's memory over JSON: GET/PUT /api/memory, POST /api/memory/instruct and
/api/memory/import. Every write goes through app.memory.store."""

from __future__ import annotations

from flask import Blueprint, jsonify
from flask_login import current_user, login_required

from app.error_codes import ErrorCode
from app.memory.store import MemoryRefused, Operation, Source, read_memory
from app.web.api import body_of
from app.web.errors import ApiError
from app.web.extensions import model_work_rate_limit
from app.web.identity import db_session
from app.web.memory_writes import apply_committed, reconcile_committed
from app.web.openapi import documented
from app.web.shapes import MemoryBody, MemoryOut, MemoryText

bp = Blueprint("memory_api", __name__, url_prefix="/api/memory")


def memory_dict(instructions: str, facts: list[str], **extra) -> dict:
    return {"instructions": instructions, "memories": facts, **extra}


def _current():
    instructions, facts = read_memory(db_session(), current_user.id)
    return memory_dict(instructions, facts)


@bp.get("")
@documented("GET", "Your memory", response=MemoryOut)
@login_required
def get_memory():
    return jsonify(_current())


@bp.put("")
@documented(
    "PUT",
    "Set your instructions and facts",
    response=MemoryOut,
    body=MemoryBody,
    errors=(ErrorCode.MEMORY_REFUSED,),
)
@login_required
def put_memory():
    """Set instructions and/or the exact list of facts (an explicit edit)."""
    body = body_of(MemoryBody)
    instructions = body.instructions
    wanted = None
    if body.memories is not None:
        wanted = [fact.strip() for fact in body.memories if fact.strip()]
    session = db_session()
    operations = []
    if wanted is not None:
        _, current = read_memory(session, current_user.id)
        operations = [
            Operation("forget", f, reason="Removed in an edit.") for f in current if f not in wanted
        ]
        operations += [
            Operation("add", f, reason="Added in an edit.") for f in wanted if f not in current
        ]
    try:
        outcome = apply_committed(
            current_user.id,
            operations,
            source="api",
            actor_id=current_user.id,
            instructions=instructions,
        )
    except MemoryRefused as refusal:
        raise ApiError(400, str(refusal), ErrorCode.MEMORY_REFUSED) from refusal
    return jsonify(memory_dict(outcome.instructions, outcome.facts))


def _reconciled(source: Source):
    text = body_of(MemoryText).text
    try:
        outcome = reconcile_committed(
            current_user.id, text, source=source, actor_id=current_user.id
        )
    except MemoryRefused as refusal:
        raise ApiError(400, str(refusal), ErrorCode.MEMORY_REFUSED) from refusal
    return jsonify(memory_dict(outcome.instructions, outcome.facts, changes=outcome.changes))


@bp.post("/instruct")
@documented(
    "POST",
    "Tell Loopdesk what to remember",
    response=MemoryOut,
    body=MemoryText,
    errors=(ErrorCode.MEMORY_REFUSED, ErrorCode.RATE_LIMITED),
)
@login_required
@model_work_rate_limit
def instruct():
    return _reconciled("api")


@bp.post("/import")
@documented(
    "POST",
    "Learn facts from a text",
    response=MemoryOut,
    body=MemoryText,
    errors=(ErrorCode.MEMORY_REFUSED, ErrorCode.RATE_LIMITED),
)
@login_required
@model_work_rate_limit
def import_text():
    return _reconciled("import")
