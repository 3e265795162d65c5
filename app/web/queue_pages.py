"""The composer's Queue and Steer, and the queue above it (app/chat/queue.py): routes of
the chat blueprint (app/web/chat.py), kept here by subject. Each answers the composer and
the queue as the server has them now (out of band), or a banner saying what went wrong,
as the composer's Send does."""

from __future__ import annotations

from flask import current_app, make_response, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from app.accounts.projects import projects_of
from app.chat.models import Conversation
from app.chat.queue import queue_items
from app.chat.unread import unread_counts
from app.web.access import is_htmx, owned_conversation_for_turn, owned_or_404
from app.web.chat import bp
from app.web.chat_actions import new_message, start_turn
from app.web.composer import composer_html
from app.web.errors import ApiError
from app.web.extensions import message_rate_limit
from app.web.identity import db_session
from app.web.queue_actions import queue_or_send, remove_from_queue, send_queued_now


@bp.app_template_global()
def chat_queue(conversation_id: int) -> list[dict]:
    """The chat's queue, as the page shows it above the composer."""
    return queue_items(db_session(), conversation_id)


@bp.app_template_global()
def unread_summary() -> dict:
    """Unread chats per project of the person's, for the chat list's heading (every
    project listed, so the page's script can count one up that had none)."""
    session = db_session()
    counts = unread_counts(session, current_user.id)
    projects = [
        {"id": project.id, "name": project.name, "count": counts.get(project.id, 0)}
        for project, _role in projects_of(session, current_user.id)
    ]
    return {"total": sum(counts.values()), "projects": projects}


def _typed_message() -> str:
    settings = current_app.config["LOOPDESK"]
    message = (request.form.get("message") or "").strip()
    if not message:
        raise ApiError(400, "Write a message first.")
    if len(message) > settings.max_message_chars:
        raise ApiError(413, f"Messages can be at most {settings.max_message_chars} characters.")
    return message


def _answer(conversation_id: int, error: ApiError | None = None, draft: str = ""):
    """The composer and the queue as they are now; with `error`, its banner (the
    composer keeps the draft)."""
    if not is_htmx():
        if error is not None:
            return render_template("error.html", status=error.status, message=error.message), (
                error.status
            )
        return redirect(url_for("chat.show", conversation_id=conversation_id), 303)
    html = composer_html(conversation_id, draft if error else None) + render_template(
        "chat/_banner.html", message=error.message if error else None, swap_oob=True
    )
    return make_response(html, error.status if error else 200, error.extra_headers if error else {})


@bp.post("/chats/<int:conversation_id>/queue")
@login_required
@message_rate_limit
def queue(conversation_id: int):
    """Queue: the message is sent when the reply being written ends (at once when none
    is being written)."""
    conversation = owned_conversation_for_turn(conversation_id)
    message = request.form.get("message") or ""
    try:
        queue_or_send(conversation.id, _typed_message())
    except ApiError as error:
        return _answer(conversation.id, error, message)
    return _answer(conversation.id)


@bp.post("/chats/<int:conversation_id>/steer")
@login_required
@message_rate_limit
def steer(conversation_id: int):
    """Steer: the reply being written stops where it is (what it wrote stays, as with
    Stop) and the message is sent now."""
    conversation = owned_conversation_for_turn(conversation_id)
    message = request.form.get("message") or ""
    try:
        start_turn(conversation.id, new_message(_typed_message()), steer=True)
    except ApiError as error:
        return _answer(conversation.id, error, message)
    return _answer(conversation.id)


@bp.post("/chats/<int:conversation_id>/queue/<int:queued_id>/delete")
@login_required
def remove_queued(conversation_id: int, queued_id: int):
    """A queued message's ×: it leaves the queue (every open page follows)."""
    conversation = owned_or_404(Conversation, conversation_id)
    try:
        remove_from_queue(conversation.id, queued_id)
    except ApiError as error:
        return _answer(conversation.id, error)
    return _answer(conversation.id)


@bp.post("/chats/<int:conversation_id>/queue/<int:queued_id>/send")
@login_required
@message_rate_limit
def send_queued(conversation_id: int, queued_id: int):
    """Send now: a queued message sent while no reply is being written (after a Stop)."""
    conversation = owned_conversation_for_turn(conversation_id)
    try:
        send_queued_now(conversation.id, queued_id)
    except ApiError as error:
        return _answer(conversation.id, error)
    return _answer(conversation.id)
