"""What a request does to a chat: start a turn (a message, a card's answer, a regenerate or
an edit), switch its branch, stop or delete it, store uploads. One transaction, then
publish and enqueue."""

from __future__ import annotations

import time

from flask import current_app, request
from flask_login import current_user
from sqlalchemy import select

from app.accounts.onboarding import starter_sources
from app.chat.attachments import save_attachment
from app.chat.conversations import conversation_dict, rename_conversation, row_dict
from app.chat.model_choice import model_named, offered_models
from app.chat.models import Conversation
from app.chat.organize import (
    BulkAction,
    BulkDone,
    ChatsNotFound,
    apply_bulk,
    set_archived,
    set_folder,
    set_pinned,
)
from app.chat.runs import lock_active_run, lock_conversation
from app.chat.stop import Stopped, stop_active_run
from app.chat.turn import BRANCHING, Edit, NewMessage, Turn, submit_turn
from app.chat.turn_checks import TurnRejected
from app.chat.turns import StartedTurn, choose_branch
from app.error_codes import ErrorCode
from app.events import (
    BranchChanged,
    ConversationChanged,
    ConversationDeleted,
    RowPersisted,
    Status,
)
from app.web.errors import ApiError
from app.web.identity import db_session
from app.workspace.attachments import AttachmentRefused, PdfLimits, read_upload
from app.workspace.models import Attachment


def new_message(text: str) -> NewMessage:
    """The person's message as a turn. Words a starter written from a web page put in it
    are not the person's: they are named as its untrusted sources."""
    return NewMessage(text, starter_sources(current_user, text))


def edited_message(sequence: int, text: str) -> Edit:
    return Edit(sequence, text, starter_sources(current_user, text))


def start_turn(conversation_id: int, turn: Turn, steer: bool = False) -> StartedTurn:
    """Start `turn` in one transaction, then tell the sockets and hand the run over.
    `steer`: a run in flight is stopped first (as Stop does, keeping what it wrote), in
    the same transaction: a turn refused leaves the run answering."""
    refuse_if_unconfirmed()
    services = current_app.extensions["services"]
    session = db_session()
    if steer:
        # Stop takes the run's row before the conversation's, as a run's end does
        # (PostgreSQL): the request's ownership check may hold the conversation already.
        session.rollback()
    try:
        stopped = stop_active_run(session, services.hub, conversation_id) if steer else None
        started = submit_turn(session, services, conversation_id, current_user.id, turn)
        conversation = session.get(Conversation, conversation_id)
        assert conversation is not None  # submit_turn locked it
        changed = conversation_dict(conversation)
        session.commit()
    except TurnRejected as rejection:
        session.rollback()
        raise _api_error(rejection) from rejection
    if stopped is not None:
        _stopped_published(services, conversation_id, stopped)
    if isinstance(turn, BRANCHING):
        # Every tab re-renders the branch now shown (the sockets read it); rows of the
        # branch left are not pushed.
        services.hub.publish(conversation_id, BranchChanged())
    else:
        for row in started.rows:
            services.hub.publish(conversation_id, RowPersisted(row_dict(row), started.run.id))
    # The working indicator from the moment the message is in (the run continues it).
    services.hub.publish(
        conversation_id, Status(started.run.id, "thinking", int(time.time() * 1000))
    )
    services.hub.publish_user(current_user.id, ConversationChanged(changed))
    # No transaction is open here: handing the run over may wait (a thread starting, a
    # queue), and SQLite's write lock must not be held meanwhile.
    current_app.extensions["executor"].submit(started.run.id)
    return started


def refuse_if_unconfirmed() -> None:
    """With VERIFY_EMAIL on, no reply is started for a person whose address is not yet
    confirmed (every page says so and offers the link again)."""
    if current_app.config["LOOPDESK"].verify_email and current_user.email_verified_at is None:
        raise ApiError(
            403,
            "Confirm your email address first: open the link we mailed you "
            "(or send it again from the notice at the top of the page).",
            ErrorCode.EMAIL_UNCONFIRMED,
        )


def _api_error(rejection: TurnRejected) -> ApiError:
    headers = {}
    if rejection.retry_after is not None:
        headers["Retry-After"] = str(rejection.retry_after)
    return ApiError(rejection.status, rejection.message, rejection.code, headers)


def switch_branch(conversation_id: int, sequence: int) -> None:
    """Show the branch through row `sequence` (PUT /api/chats/<id>/branch, the page's
    pager); every tab follows."""
    session = db_session()
    try:
        changed = choose_branch(session, conversation_id, current_user.id, sequence)
        session.commit()
    except TurnRejected as rejection:
        session.rollback()
        raise _api_error(rejection) from rejection
    if changed:
        current_app.extensions["services"].hub.publish(conversation_id, BranchChanged())


def stop_conversation(conversation_id: int) -> Stopped | None:
    """Cancel the run in flight, keeping what was shown of it (app.chat.stop); the run's
    stream is cut here at once, in another process within a few seconds. None when
    nothing was in flight."""
    services = current_app.extensions["services"]
    session = db_session()
    stopped = stop_active_run(session, services.hub, conversation_id)
    session.commit()
    if stopped is None:
        return None
    _stopped_published(services, conversation_id, stopped)
    return stopped


def _stopped_published(services, conversation_id: int, stopped: Stopped) -> None:
    """After the stop's commit: the run's stream is cut, and the rows it kept shown."""
    services.cancellations.add(stopped.run.id)
    for row in stopped.rows:
        services.hub.publish(conversation_id, RowPersisted(row_dict(row), stopped.run.id))


def delete_conversation(conversation_id: int) -> None:
    """Delete the conversation with its rows and runs. A run answering in it is cancelled
    first: here at once (its stream is cut at the next event), in another process when
    its monitor finds the run gone."""
    session = db_session()
    run = lock_active_run(session, conversation_id)  # before the conversation: see there
    conversation = lock_conversation(session, conversation_id)
    if conversation is None:
        session.rollback()
        return
    session.delete(conversation)
    session.commit()
    if run is not None:
        current_app.extensions["services"].cancellations.add(run.id)


def organize_conversation(conversation: Conversation, changes: dict) -> None:
    """Rename, pin, archive or file the person's chat (`changes`: any of title, pinned,
    archived, folder, already validated), in one transaction; every tab follows."""
    session = db_session()
    if "title" in changes:
        rename_conversation(conversation, changes["title"])
    if "pinned" in changes:
        set_pinned(conversation, changes["pinned"])
    if "archived" in changes:
        set_archived(conversation, changes["archived"])
    if "folder" in changes:
        set_folder(conversation, changes["folder"])
    session.commit()
    current_app.extensions["services"].hub.publish_user(
        current_user.id, ConversationChanged(conversation_dict(conversation))
    )


def bulk_organize(ids: list[int], action: BulkAction) -> BulkDone:
    """Archive, restore or delete several of the person's chats: all in one transaction,
    or none (404 naming an id that is not theirs). Runs answering in deleted chats are
    cut as a single delete cuts them; every tab follows."""
    services = current_app.extensions["services"]
    session = db_session()
    try:
        done = apply_bulk(session, current_user.id, ids, action)
        changed = [
            conversation_dict(conversation)
            for conversation in session.scalars(
                select(Conversation).where(Conversation.id.in_(done.ids))
            )
        ]
        session.commit()
    except ChatsNotFound as missing:
        session.rollback()
        raise ApiError(
            404,
            f"Chat {missing.conversation_id} is not one of yours: nothing was changed.",
            ErrorCode.NOT_FOUND,
            field="ids",
        ) from None
    for run_id in done.cancelled_runs:
        services.cancellations.add(run_id)
    for conversation_id in done.ids if action == "delete" else ():
        services.hub.publish_user(current_user.id, ConversationDeleted(conversation_id))
    for item in changed:
        services.hub.publish_user(current_user.id, ConversationChanged(item))
    return done


def store_request_upload(conversation_id: int) -> Attachment:
    """The request's `file`, attached to the conversation (committed)."""
    return store_request_uploads(conversation_id, request.files.getlist("file")[:1])[0]


def store_request_uploads(conversation_id: int, uploads: list) -> list[Attachment]:
    """The request's files, attached to the conversation (committed) together: one refused
    file refuses them all. The bodies are read and their text extracted before any
    transaction opens (a trickled upload or a heavy PDF holds nothing another request
    needs); then one short write. Raises AttachmentRefused (404 when the conversation
    went meanwhile)."""
    settings = current_app.extensions["services"].settings
    limits = PdfLimits(
        seconds=settings.pdf_extract_seconds, content_bytes=settings.pdf_max_content_bytes
    )
    prepared = [
        read_upload(upload, max_bytes=settings.attachment_max_bytes, pdf_limits=limits)
        for upload in [u for u in uploads if u and u.filename] or [None]
    ]
    session = db_session()
    try:
        attachments = [
            save_attachment(session, current_user.id, conversation_id, item) for item in prepared
        ]
    except AttachmentRefused:
        session.rollback()
        raise
    session.commit()
    return attachments


def offered_model_name(name: str | None) -> str | None:
    """`name` when people may pick it (None: the default); 400 `UNKNOWN_MODEL` otherwise."""
    settings = current_app.extensions["services"].settings
    if name is not None and model_named(offered_models(db_session(), settings), name) is None:
        raise ApiError(
            400,
            f"No model named {name!r} is offered (GET /api/models lists them).",
            ErrorCode.UNKNOWN_MODEL,
            field="model",
        )
    return name
