"""The JSON API (docs/CONTRACT.md). Browsers send the CSRF header; scripts a bearer token."""

from __future__ import annotations

import json

from flask import Blueprint, current_app, jsonify, request
from flask_login import current_user, login_required

from app.agents.guidelines import (
    MAX_RULES,
    GuidelineError,
    RuleInput,
    ordered_guidelines,
    replace_rules,
)
from app.chat.branches import branch_version, current_leaf, shown_rows
from app.chat.conversations import (
    conversation_dict,
    conversations_for,
    create_conversation,
)
from app.chat.models import ACTIVE_RUN_STATUSES, Conversation, Run
from app.web.access import (
    owned_before_waiting,
    owned_conversation,
    owned_conversation_for_turn,
    owned_or_404,
)
from app.web.admin import admin_required
from app.web.chat_actions import start_turn, stop_conversation, store_request_upload, switch_branch
from app.web.errors import ApiError
from app.web.extensions import message_rate_limit
from app.web.identity import db_session
from app.web.input_gate import id_from_text
from app.web.openapi import UPLOAD, Param, documented
from app.web.shapes import (
    AttachmentOut,
    BranchBody,
    BranchOut,
    ChatCreate,
    ChatCreated,
    ChatList,
    LoopBody,
    MessageList,
    RulesBody,
    RulesOut,
    RunOut,
    RunStarted,
    Stopped,
)
from app.workspace.attachments import AttachmentRefused

bp = Blueprint("api", __name__, url_prefix="/api")


def json_body() -> dict:
    """The request's JSON object, or a 4xx that says what is wrong with it."""
    if not request.is_json:
        raise ApiError(415, "Send a JSON body with Content-Type: application/json.")
    data = request.get_json(silent=True)
    if data is None:
        raise ApiError(400, "The body is not valid JSON.", "INVALID_JSON")
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object.", "INVALID_JSON")
    return data


def optional_string(data: dict, key: str, max_length: int) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"'{key}' must be a string.", "INVALID_FIELD")
    if len(value) > max_length:
        raise ApiError(400, f"'{key}' is longer than {max_length} characters.", "INVALID_FIELD")
    return value


@bp.post("/chats")
@documented("POST", "Create a chat", response=ChatCreated, status=201, body=ChatCreate)
@login_required
def create_chat():
    data = json_body() if request.content_length else {}
    title = optional_string(data, "title", 120)
    session = db_session()
    conversation = create_conversation(session, current_user.id, title)
    session.commit()
    return jsonify({"id": conversation.id}), 201


@bp.get("/chats")
@documented("GET", "List your chats", response=ChatList)
@login_required
def list_chats():
    chats = conversations_for(db_session(), current_user.id)
    return jsonify({"chats": [conversation_dict(c) for c in chats]})


@bp.get("/chats/<int:conversation_id>/messages")
@documented(
    "GET",
    "The shown branch's rows",
    response=MessageList,
    query=(Param("after", {"type": "integer", "minimum": 0}, "rows above this sequence"),),
)
@login_required
def list_messages(conversation_id: int):
    conversation = owned_conversation(conversation_id)
    # ASCII digits only (str.isdigit accepts '²'), and small enough for the database.
    after = id_from_text(request.args.get("after", "0"))
    if after is None:
        raise ApiError(400, "'after' must be a non-negative whole number.", "INVALID_FIELD")
    rows = shown_rows(db_session(), conversation, after)
    return jsonify({"messages": rows})


LOOP_FIELDS = {"message", "toolResponse", "regenerate", "edit"}


def _message_text(message, max_chars: int, name: str = "message") -> str:
    if not isinstance(message, str):
        raise ApiError(400, f"'{name}' must be a string.", "INVALID_FIELD")
    if not message.strip():
        raise ApiError(400, f"'{name}' is empty.", "INVALID_FIELD")
    if len(message) > max_chars:
        raise ApiError(413, f"'{name}' is longer than {max_chars} characters.", "TOO_LARGE")
    return message.strip()


def _sequence(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 10**15:
        raise ApiError(400, f"'{name}' must be a positive whole number.", "INVALID_FIELD")
    return value


def _loop_request(data: dict, max_chars: int):
    """(message, toolResponse, branch): what the loop route was sent."""
    unknown = set(data) - LOOP_FIELDS
    if unknown:
        raise ApiError(400, f"Unknown field(s): {', '.join(sorted(unknown))}.", "INVALID_FIELD")
    if len(set(data) & LOOP_FIELDS) != 1:
        raise ApiError(
            400, "Send one of 'message', 'toolResponse', 'regenerate' or 'edit'.", "INVALID_BODY"
        )
    if "message" in data:
        return _message_text(data["message"], max_chars), None, None
    if "regenerate" in data:
        return None, None, ("regenerate", _sequence(data["regenerate"], "regenerate"))
    if "edit" in data:
        edit = data["edit"]
        if not isinstance(edit, dict) or set(edit) != {"sequence", "message"}:
            raise ApiError(400, "'edit' must be {sequence, message}.", "INVALID_FIELD")
        sequence = _sequence(edit["sequence"], "edit.sequence")
        return _message_text(edit["message"], max_chars, "edit.message"), None, ("edit", sequence)
    response = data["toolResponse"]
    if not isinstance(response, dict) or set(response) - {"toolUseId", "result"}:
        raise ApiError(400, "'toolResponse' must be {toolUseId, result}.", "INVALID_FIELD")
    tool_use_id, result = response.get("toolUseId"), response.get("result")
    if not isinstance(tool_use_id, str) or not tool_use_id or len(tool_use_id) > 200:
        raise ApiError(400, "'toolResponse.toolUseId' must be a non-empty string.", "INVALID_FIELD")
    if not isinstance(result, dict):
        raise ApiError(400, "'toolResponse.result' must be an object.", "INVALID_FIELD")
    if len(json.dumps(result)) > max_chars:
        raise ApiError(413, "'toolResponse.result' is too large.", "TOO_LARGE")
    return None, (tool_use_id, result), None


@bp.post("/chats/<int:conversation_id>/loop")
@documented(
    "POST",
    "Send a message, answer a card, regenerate or edit",
    response=RunStarted,
    status=202,
    body=LoopBody,
)
@login_required
@message_rate_limit
def loop(conversation_id: int):
    # Read the body before the first write takes SQLite's lock, never while holding it.
    request.get_data(cache=True)
    owned_conversation_for_turn(conversation_id)
    services = current_app.extensions["services"]
    message, tool_response, branch = _loop_request(json_body(), services.settings.max_message_chars)
    started = start_turn(conversation_id, message, tool_response, branch)
    return jsonify({"runId": started.run.id}), 202


@bp.put("/chats/<int:conversation_id>/branch")
@documented("PUT", "Show the branch through a row", response=BranchOut, body=BranchBody)
@login_required
def choose_branch(conversation_id: int):
    """Show the branch through row `sequence`; every client follows (docs/CONTRACT.md)."""
    request.get_data(cache=True)
    owned_conversation(conversation_id)
    data = json_body()
    if set(data) != {"sequence"}:
        raise ApiError(400, "Send {sequence}.", "INVALID_BODY")
    switch_branch(conversation_id, _sequence(data["sequence"], "sequence"))
    return jsonify(_branch_body(conversation_id))


def _branch_body(conversation_id: int) -> dict:
    session = db_session()
    conversation = session.get(Conversation, conversation_id)
    session.refresh(conversation)
    return {
        "messages": shown_rows(session, conversation),
        "leaf": current_leaf(session, conversation),
        "branch": branch_version(conversation),
    }


@bp.post("/chats/<int:conversation_id>/stop")
@documented("POST", "Stop the reply being written", response=Stopped)
@login_required
def stop(conversation_id: int):
    owned_or_404(Conversation, conversation_id)
    run = stop_conversation(conversation_id)
    return jsonify({"stopped": run is not None, "runId": run.id if run else None})


@bp.get("/runs/<int:run_id>")
@documented("GET", "A run's status", response=RunOut)
@login_required
def get_run(run_id: int):
    run = owned_or_404(Run, run_id)
    if run.status in ACTIVE_RUN_STATUSES:
        owned_conversation(run.conversation_id)
        db_session().refresh(run)
    data = {"id": run.id, "status": run.status, "iterations": run.iterations}
    if run.error:
        data["error"] = run.error
    return jsonify(data)


# -- shared guidelines (admins) -------------------------------------------------------------

RULE_FIELDS = {"id", "text", "enabled", "position"}  # position: echoed back from GET, ignored


def _guideline_dict(guideline) -> dict:
    return {
        "id": guideline.id,
        "text": guideline.text,
        "enabled": guideline.enabled,
        "position": guideline.position,
    }


def _rule_inputs(data: dict) -> list[RuleInput]:
    unknown = set(data) - {"rules"}
    if unknown:
        raise ApiError(400, f"Unknown field(s): {', '.join(sorted(unknown))}.", "INVALID_FIELD")
    items = data.get("rules")
    if not isinstance(items, list):
        raise ApiError(400, "'rules' must be a list of {id?, text, enabled?}.", "INVALID_FIELD")
    if len(items) > MAX_RULES:
        raise ApiError(400, f"There can be at most {MAX_RULES} rules.", "TOO_MANY_RULES")
    parsed = []
    for number, item in enumerate(items, start=1):
        where = f"rules[{number - 1}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"{where} must be an object.", "INVALID_FIELD")
        unknown = set(item) - RULE_FIELDS
        if unknown:
            raise ApiError(
                400, f"{where}: unknown field(s) {', '.join(sorted(unknown))}.", "INVALID_FIELD"
            )
        rule_id = item.get("id")
        if rule_id is not None and (isinstance(rule_id, bool) or not isinstance(rule_id, int)):
            raise ApiError(400, f"{where}.id must be a whole number.", "INVALID_FIELD")
        value = item.get("text")
        if not isinstance(value, str):
            raise ApiError(400, f"{where}.text must be a string.", "INVALID_FIELD")
        enabled = item.get("enabled")
        if enabled is not None and not isinstance(enabled, bool):
            raise ApiError(400, f"{where}.enabled must be true or false.", "INVALID_FIELD")
        parsed.append(RuleInput(rule_id, value, enabled))
    return parsed


@bp.get("/admin/guidelines")
@documented("GET", "The shared guidelines (admins)", response=RulesOut)
@admin_required
def get_guidelines():
    session = db_session()
    guidelines = ordered_guidelines(session)
    session.commit()  # a first read seeds the rules
    return jsonify({"rules": [_guideline_dict(g) for g in guidelines]})


@bp.put("/admin/guidelines")
@documented("PUT", "Replace the shared guidelines (admins)", response=RulesOut, body=RulesBody)
@admin_required
def put_guidelines():
    """Replace the whole ordered list in one transaction; on any error nothing changes."""
    items = _rule_inputs(json_body())
    session = db_session()
    try:
        guidelines = replace_rules(session, items, current_user.id)
    except GuidelineError as error:
        session.rollback()
        raise ApiError(400, str(error), "INVALID_RULES") from None
    session.commit()
    return jsonify({"rules": [_guideline_dict(g) for g in guidelines]})


# -- attachments ----------------------------------------------------------------------------


@bp.post("/chats/<int:conversation_id>/attachments")
@documented("POST", "Attach a file", response=AttachmentOut, status=201, body=UPLOAD)
@login_required
def upload_attachment(conversation_id: int):
    """Attach a file to a conversation (multipart/form-data, field `file`) for the model to
    read with read_attachment."""
    conversation = owned_before_waiting(Conversation, conversation_id)
    try:
        attachment = store_request_upload(conversation.id)
    except AttachmentRefused as refused:
        raise ApiError(refused.status, refused.message, "ATTACHMENT_REFUSED") from None
    body = {
        "id": attachment.id,
        "filename": attachment.filename,
        "content_type": attachment.content_type,
        "size": attachment.size,
    }
    return jsonify(body), 201
