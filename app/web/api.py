"""The JSON API (docs/CONTRACT.md). Browsers send the CSRF header; scripts a bearer token."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request
from flask_login import current_user, login_required
from pydantic import BaseModel, RootModel, ValidationError

from app.accounts.projects import READ
from app.agents.guidelines import (
    GuidelineError,
    RuleInput,
    ordered_guidelines,
    replace_rules,
)
from app.chat import turn
from app.chat.branches import branch_version, current_leaf, shown_rows
from app.chat.conversations import (
    conversation_dict,
    create_conversation,
)
from app.chat.models import ACTIVE_RUN_STATUSES, Conversation, QueuedMessage, Run
from app.chat.organize import FolderNameRefused, folder_name, folder_names, listed_conversations
from app.chat.queue import queued_dict
from app.chat.turn import Turn
from app.error_codes import ErrorCode
from app.web.access import (
    owned_before_waiting,
    owned_conversation,
    owned_conversation_for_turn,
    owned_or_404,
    require_in_project,
    seen_preset_or_404,
)
from app.web.admin import admin_required
from app.web.chat_actions import (
    bulk_organize,
    edited_message,
    new_message,
    organize_conversation,
    start_turn,
    stop_conversation,
    store_request_upload,
    switch_branch,
)
from app.web.chat_shapes import FOLDER_PATTERN, ChatPatch, ChatsBulk, ChatsBulkDone
from app.web.errors import ApiError
from app.web.extensions import message_rate_limit
from app.web.identity import db_session
from app.web.input_gate import id_from_text
from app.web.model_picker import choose_chat_model
from app.web.openapi import MAX_ID, UPLOAD, Param, digits, documented
from app.web.project_access import set_chat_project
from app.web.queue_actions import queue_or_send
from app.web.shapes import (
    AttachmentOut,
    BranchBody,
    BranchOut,
    CardAnswer,
    ChatCreate,
    ChatCreated,
    ChatList,
    ChatOut,
    Edit,
    LoopBody,
    MessageList,
    NewMessage,
    Regenerate,
    RulesBody,
    RulesOut,
    RunOut,
    RunStarted,
    Stopped,
)
from app.web.workspace_api import requested_project
from app.workspace.attachments import AttachmentRefused

bp = Blueprint("api", __name__, url_prefix="/api")


def json_body() -> dict:
    """The request's JSON object, or a 4xx that says what is wrong with it."""
    if not request.is_json:
        raise ApiError(415, "Send a JSON body with Content-Type: application/json.")
    data = request.get_json(silent=True)
    if data is None:
        raise ApiError(400, "The body is not valid JSON.", ErrorCode.INVALID_JSON)
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object.", ErrorCode.INVALID_JSON)
    return data


def body_of(model: type[BaseModel], data: dict | None = None):
    """The JSON body parsed by `model`, the same model that documents it (app/web/shapes.py),
    or 400 `INVALID_FIELD` naming the field at fault (`INVALID_BODY` for a loop body that
    is none of its four kinds; 413 `TOO_LARGE` for a message over MAX_MESSAGE_CHARS)."""
    data = json_body() if data is None else data
    max_chars = current_app.extensions["services"].settings.max_message_chars
    try:
        parsed = model.model_validate(data, context={"max_chars": max_chars})
    except ValidationError as invalid:
        raise _body_error(model, invalid.errors()[0]) from None
    return parsed.root if isinstance(parsed, RootModel) else parsed


def _body_error(model: type[BaseModel], error) -> ApiError:
    location = list(error["loc"])
    if issubclass(model, RootModel) and location:
        location = location[1:]  # the union's tag: the kind of body
    name = ".".join(str(part) for part in location) or None
    if error["type"] == ErrorCode.INVALID_BODY:
        return ApiError(400, error["msg"], ErrorCode.INVALID_BODY)
    if error["type"] == "extra_forbidden":
        message = f"Unknown field '{name}'."
    elif error["type"] == "missing":
        message = f"'{name}' is missing."
    else:
        message = f"'{name}': {error['msg']}." if name else f"{error['msg']}."
    if error["type"] == "too_large":
        return ApiError(413, message, ErrorCode.TOO_LARGE, field=name)
    return ApiError(400, message, ErrorCode.INVALID_FIELD, field=name)


@bp.post("/chats")
@documented(
    "POST",
    "Create a chat",
    response=ChatCreated,
    status=201,
    body=ChatCreate,
    body_required=False,
    # a project_id of which the caller is no member, a preset_id they do not see
    errors=(ErrorCode.NOT_FOUND,),
)
@login_required
def create_chat():
    body = body_of(ChatCreate, None if request.content_length else {})
    session = db_session()
    if body.project_id is not None:  # a project of the caller's (404 for any other)
        require_in_project(body.project_id, READ)
    if body.preset_id is not None:
        seen_preset_or_404(body.preset_id)
    conversation = create_conversation(
        session, current_user.id, body.title, body.project_id, body.preset_id
    )
    session.commit()
    return jsonify({"id": conversation.id}), 201


@bp.get("/chats")
@documented(
    "GET",
    "List your chats",
    response=ChatList,
    query=(
        Param(
            "archived",
            {"type": "string", "enum": ["true", "false"]},
            "the archived chats instead of the others (default false)",
        ),
        Param(
            "folder",
            {"type": "string", "maxLength": 60, "pattern": FOLDER_PATTERN},
            "only the chats in this folder (of each project, or of project_id); empty: only"
            " those in none",
        ),
        Param(
            "project_id",
            digits(10, "only the chats of this project of yours (with its folders)"),
        ),
    ),
    errors=(ErrorCode.NOT_FOUND,),
)
@login_required
def list_chats():
    """The caller's chats, newest activity first; archived ones only when asked; one
    project's only (with its folders) when asked."""
    archived = request.args.get("archived", "false")
    if archived not in ("true", "false"):
        raise ApiError(
            400, "'archived' must be true or false.", ErrorCode.INVALID_FIELD, field="archived"
        )
    folder = request.args.get("folder")
    if folder is not None:
        try:
            folder = folder_name(folder) or ""
        except FolderNameRefused as refused:
            raise ApiError(400, str(refused), ErrorCode.INVALID_FIELD, field="folder") from None
    project_id = requested_project()
    session = db_session()
    if project_id is not None:
        require_in_project(project_id, READ)  # 404 for a project not yours
    chats = listed_conversations(
        session, current_user.id, archived=archived == "true", folder=folder, project_id=project_id
    )
    answer = {"chats": [conversation_dict(c) for c in chats]}
    if project_id is not None:
        answer["folders"] = folder_names(session, current_user.id, project_id)
    return jsonify(answer)


@bp.patch("/chats/<int:conversation_id>")
@documented(
    "PATCH",
    "Rename, pin, archive, file or move a chat, or pick its model",
    response=ChatOut,
    body=ChatPatch,
    errors=(ErrorCode.UNKNOWN_MODEL,),
)
@login_required
def patch_chat(conversation_id: int):
    """Any of title, folder, pinned, archived, project_id, model; the fields left out keep
    their value."""
    request.get_data(cache=True)  # read before any lock is taken
    conversation = owned_or_404(Conversation, conversation_id)
    body = body_of(ChatPatch)
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    if "model" in changes:  # 400 UNKNOWN_MODEL before anything changes
        choose_chat_model(conversation, changes.pop("model"))
    if "project_id" in changes:
        set_chat_project(conversation, changes.pop("project_id"))
    organize_conversation(conversation, changes)
    return jsonify(conversation_dict(conversation))


@bp.post("/chats/bulk")
@documented(
    "POST",
    "Archive, restore or delete several chats",
    response=ChatsBulkDone,
    body=ChatsBulk,
    errors=(ErrorCode.NOT_FOUND,),
)
@login_required
def bulk_chats():
    """All of them or none: an id that is not one of the caller's chats is 404 and
    nothing changes. Deleting a chat being answered cancels its run (as one delete does)."""
    body = body_of(ChatsBulk)
    done = bulk_organize(body.ids, body.action)
    return jsonify({"action": done.action, "ids": done.ids})


@bp.get("/chats/<int:conversation_id>/messages")
@documented(
    "GET",
    "The shown branch's rows",
    response=MessageList,
    query=(
        Param(
            "after",
            {"type": "integer", "minimum": 0, "maximum": MAX_ID},
            "rows above this sequence",
        ),
    ),
)
@login_required
def list_messages(conversation_id: int):
    conversation = owned_conversation(conversation_id)
    # ASCII digits only (str.isdigit accepts '²'), and small enough for the database.
    after = id_from_text(request.args.get("after", "0"))
    if after is None or after > MAX_ID:
        raise ApiError(400, "'after' must be a non-negative whole number.", ErrorCode.INVALID_FIELD)
    rows = shown_rows(db_session(), conversation, after)
    return jsonify({"messages": rows})


def _turn_of(body: NewMessage | CardAnswer | Regenerate | Edit) -> Turn:
    """The turn the loop route's body asks for."""
    if isinstance(body, NewMessage):
        return new_message(body.message)
    if isinstance(body, Regenerate):
        return turn.Regenerate(body.regenerate)
    if isinstance(body, Edit):
        return edited_message(body.edit.sequence, body.edit.message)
    return turn.CardAnswer(body.toolResponse.toolUseId, body.toolResponse.result)


@bp.post("/chats/<int:conversation_id>/loop")
@documented(
    "POST",
    "Send a message, answer a card, regenerate or edit",
    response=RunStarted,
    status=202,
    body=LoopBody,
    errors=(
        ErrorCode.INVALID_BODY,
        ErrorCode.INVALID_ANSWER,
        ErrorCode.CARD_NOT_AWAITING,
        ErrorCode.RUN_IN_FLIGHT,
        ErrorCode.QUEUE_FULL,
        ErrorCode.QUOTA_EXCEEDED,
        ErrorCode.TOO_MANY_RUNS,
        ErrorCode.RATE_LIMITED,
        ErrorCode.EMAIL_UNCONFIRMED,
    ),
)
@login_required
@message_rate_limit
def loop(conversation_id: int):
    # Read the body before the first write takes SQLite's lock, never while holding it.
    request.get_data(cache=True)
    owned_conversation_for_turn(conversation_id)
    body = body_of(LoopBody)
    when = body.when if isinstance(body, NewMessage) else None
    if when == "after":  # queued while a reply is being written (app/chat/queue.py)
        done = queue_or_send(conversation_id, body.message)
        if isinstance(done, QueuedMessage):
            return jsonify({"runId": None, "queued": True, "queuedMessage": queued_dict(done)}), 202
        return jsonify({"runId": done.run.id}), 202
    started = start_turn(conversation_id, _turn_of(body), steer=when == "now")
    return jsonify({"runId": started.run.id}), 202


@bp.put("/chats/<int:conversation_id>/branch")
@documented(
    "PUT",
    "Show the branch through a row",
    response=BranchOut,
    body=BranchBody,
    errors=(ErrorCode.RUN_IN_FLIGHT,),
)
@login_required
def choose_branch(conversation_id: int):
    """Show the branch through row `sequence`; every client follows (docs/CONTRACT.md)."""
    request.get_data(cache=True)
    owned_conversation(conversation_id)
    switch_branch(conversation_id, body_of(BranchBody).sequence)
    return jsonify(_branch_body(conversation_id))


def _branch_body(conversation_id: int) -> dict:
    session = db_session()
    conversation = session.get(Conversation, conversation_id)
    assert conversation is not None  # the route checked it is the person's
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
    stopped = stop_conversation(conversation_id)
    run_id = stopped.run.id if stopped else None
    return jsonify({"stopped": stopped is not None, "runId": run_id})


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


def _guideline_dict(guideline) -> dict:
    return {
        "id": guideline.id,
        "text": guideline.text,
        "enabled": guideline.enabled,
        "position": guideline.position,
    }


@bp.get("/admin/guidelines")
@documented("GET", "The shared guidelines (admins)", response=RulesOut)
@admin_required
def get_guidelines():
    session = db_session()
    guidelines = ordered_guidelines(session)
    session.commit()  # a first read seeds the rules
    return jsonify({"rules": [_guideline_dict(g) for g in guidelines]})


@bp.put("/admin/guidelines")
@documented(
    "PUT",
    "Replace the shared guidelines (admins)",
    response=RulesOut,
    body=RulesBody,
    errors=(ErrorCode.INVALID_RULES,),
)
@admin_required
def put_guidelines():
    """Replace the whole ordered list in one transaction; on any error nothing changes."""
    items = [RuleInput(rule.id, rule.text, rule.enabled) for rule in body_of(RulesBody).rules]
    session = db_session()
    try:
        guidelines = replace_rules(session, items, current_user.id)
    except GuidelineError as error:
        session.rollback()
        raise ApiError(400, str(error), ErrorCode.INVALID_RULES) from None
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
        raise ApiError(refused.status, refused.message, ErrorCode.ATTACHMENT_REFUSED) from None
    body = {
        "id": attachment.id,
        "filename": attachment.filename,
        "content_type": attachment.content_type,
        "size": attachment.size,
    }
    return jsonify(body), 201
