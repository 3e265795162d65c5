"""The conversation list and the chat page."""

from __future__ import annotations

from flask import Blueprint, make_response, redirect, render_template, request, url_for
from flask_login import current_user, login_required

from app.chat.conversations import conversations_for, create_conversation
from app.chat.models import Conversation
from app.chat.rows import rows_after
from app.web.access import is_htmx, owned_or_404
from app.web.forms import ChatTitleForm, ConfirmForm
from app.web.identity import db_session

bp = Blueprint("chat", __name__)


def _page(conversation: Conversation | None):
    session = db_session()
    rows = rows_after(session, conversation.id) if conversation else []
    return render_template(
        "chat/page.html",
        conversations=conversations_for(session, current_user.id),
        conversation=conversation,
        rows=rows,
        form=ConfirmForm(),
    )


@bp.get("/")
@login_required
def index():
    conversations = conversations_for(db_session(), current_user.id)
    if conversations:
        return redirect(url_for("chat.show", conversation_id=conversations[0].id))
    return _page(None)


@bp.get("/chats/<int:conversation_id>")
@login_required
def show(conversation_id: int):
    return _page(owned_or_404(Conversation, conversation_id))


@bp.post("/chats")
@login_required
def create():
    session = db_session()
    conversation = create_conversation(session, current_user.id)
    session.commit()
    target = url_for("chat.show", conversation_id=conversation.id)
    if is_htmx():
        response = make_response("", 201)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target)


@bp.route("/chats/<int:conversation_id>/rename", methods=["GET", "POST"])
@login_required
def rename(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    form = ChatTitleForm(obj=conversation)
    if request.method == "POST":
        if not form.validate():
            return render_template(
                "chat/_rename_form.html", conversation=conversation, form=form
            ), 400
        conversation.title = form.title.data.strip()
        db_session().commit()
        if not is_htmx():
            return redirect(url_for("chat.show", conversation_id=conversation.id))
        return render_template("chat/_conversation_item.html", item=conversation, current=None)
    return render_template("chat/_rename_form.html", conversation=conversation, form=form)


@bp.get("/chats/<int:conversation_id>/item")
@login_required
def item(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    return render_template("chat/_conversation_item.html", item=conversation, current=None)


@bp.post("/chats/<int:conversation_id>/delete")
@login_required
def delete(conversation_id: int):
    session = db_session()
    session.delete(owned_or_404(Conversation, conversation_id))
    session.commit()
    if is_htmx():
        response = make_response("", 200)
        if (
            request.headers.get("HX-Current-URL", "")
            .rstrip("/")
            .endswith(f"/chats/{conversation_id}")
        ):
            response.headers["HX-Redirect"] = url_for("chat.index")
        return response
    return redirect(url_for("chat.index"))
