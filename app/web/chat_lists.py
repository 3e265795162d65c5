"""The chat list's pins, folders and archive (app/chat/organize.py): the item's Pin, Move
and Archive, Select's bulk actions, and the Archived page. Routes of the chat blueprint
(app/web/chat.py), kept here by subject; each answers the list it was made from."""

from __future__ import annotations

from flask import abort, make_response, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from app.chat.models import Conversation
from app.chat.organize import (
    BULK_ACTIONS,
    MAX_BULK_IDS,
    FolderNameRefused,
    folder_name,
    folder_names,
    listed_conversations,
    project_names,
    sidebar_context,
)
from app.error_codes import ErrorCode
from app.web.access import is_htmx, owned_or_404, shown_chat_id
from app.web.chat import bp
from app.web.chat_actions import bulk_organize, organize_conversation
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.input_gate import id_from_text


def _archived_context() -> dict:
    return {"archived_chats": listed_conversations(db_session(), current_user.id, archived=True)}


@bp.get("/chats/list")
@login_required
def sidebar():
    """The chat list alone: the page fetches it again when a socket's item belongs in
    another group (pinned, filed or archived in another tab)."""
    return render_template(
        "chat/_conversation_list.html", **sidebar_context(db_session(), current_user.id)
    )


@bp.get("/chats/archived")
@login_required
def archived():
    """The archived chats, each with Restore and Delete (bulk too)."""
    if current_user.must_onboard:
        return redirect(url_for("chat.welcome"))
    return render_template(
        "chat/archived.html",
        **sidebar_context(db_session(), current_user.id),
        **_archived_context(),
    )


def _organized(fallback: str):
    """The answer to a list action: the list it was made from (the sidebar's, or the
    Archived page's), or, without htmx, back to the page."""
    from_archived = request.form.get("view") == "archived"
    if not is_htmx():
        return redirect(url_for("chat.archived") if from_archived else fallback, 303)
    if from_archived:
        return render_template("chat/_archived_list.html", **_archived_context())
    return render_template(
        "chat/_conversation_list.html", **sidebar_context(db_session(), current_user.id)
    )


def _form_flag(name: str) -> bool | None:
    value = request.form.get(name)
    if value is None:
        return None
    if value not in ("true", "false"):
        raise ApiError(400, f"'{name}' must be true or false.", ErrorCode.INVALID_FIELD)
    return value == "true"


@bp.post("/chats/<int:conversation_id>/organize")
@login_required
def organize(conversation_id: int):
    """Pin, unpin, archive, restore or move to a folder (form fields `pinned`,
    `archived`: true|false; `folder`, or `new_folder` which wins when given)."""
    conversation = owned_or_404(Conversation, conversation_id)
    changes: dict = {}
    for name in ("pinned", "archived"):
        flag = _form_flag(name)
        if flag is not None:
            changes[name] = flag
    chosen = (request.form.get("new_folder") or "").strip() or request.form.get("folder")
    if chosen is not None:
        try:
            changes["folder"] = folder_name(chosen)
        except FolderNameRefused as refused:
            raise ApiError(400, str(refused), ErrorCode.INVALID_FIELD) from None
    organize_conversation(conversation, changes)
    return _organized(url_for("chat.show", conversation_id=conversation.id))


@bp.get("/chats/<int:conversation_id>/folder")
@login_required
def folder_form(conversation_id: int):
    """The "Move" form in the list: the person's folders in the chat's project, no
    folder, or a new one."""
    conversation = owned_or_404(Conversation, conversation_id)
    session = db_session()
    return render_template(
        "chat/_folder_form.html",
        conversation=conversation,
        folders=folder_names(session, current_user.id, conversation.project_id),
        project_name=project_names(session, current_user.id).get(conversation.project_id),
    )


@bp.post("/chats/bulk")
@login_required
def bulk():
    """The list's "Archive selected", "Delete selected" (and the Archived page's "Restore
    selected"): all the chats ticked, or none. The page asked the person first."""
    action = request.form.get("action")
    raw_ids = request.form.getlist("ids")
    if action not in BULK_ACTIONS:
        raise ApiError(400, "Say what to do with the chats.", ErrorCode.INVALID_FIELD)
    ids = [id_from_text(raw) for raw in raw_ids]
    if not ids:
        raise ApiError(400, "Select at least one chat first.", ErrorCode.INVALID_FIELD)
    if len(ids) > MAX_BULK_IDS:
        raise ApiError(
            400, f"Select at most {MAX_BULK_IDS} chats at once.", ErrorCode.INVALID_FIELD
        )
    if any(chat_id is None for chat_id in ids):
        abort(404)
    done = bulk_organize([chat_id for chat_id in ids if chat_id is not None], action)
    response = make_response(_organized(url_for("chat.index")))
    if action == "delete" and is_htmx() and shown_chat_id() in done.ids:
        response.headers["HX-Redirect"] = url_for("chat.index")  # the chat shown went
    return response
