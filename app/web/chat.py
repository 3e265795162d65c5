"""The conversation list and the chat page."""

from __future__ import annotations

from flask import (
    Blueprint,
    current_app,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required

from app.chat.conversations import (
    conversations_for,
    create_conversation,
    row_dict,
)
from app.chat.models import STREAMING, Conversation
from app.chat.rows import rows_after
from app.extensions import message_rate_limit
from app.web.access import is_htmx, owned_or_404
from app.web.errors import ApiError
from app.web.forms import ChatTitleForm, ConfirmForm
from app.web.identity import db_session
from app.web.turns import start_turn, stop_conversation

bp = Blueprint("chat", __name__)


def _page(conversation: Conversation | None):
    session = db_session()
    rows = [row_dict(r) for r in rows_after(session, conversation.id)] if conversation else []
    return render_template(
        "chat/page.html",
        conversations=conversations_for(session, current_user.id),
        conversation=conversation,
        rows=rows,
        busy=conversation is not None and conversation.status == STREAMING,
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


@bp.get("/chats/<int:conversation_id>/rows")
@login_required
def rows(conversation_id: int):
    """Rows after a sequence, as row partials: how a reconnected page catches up."""
    conversation = owned_or_404(Conversation, conversation_id)
    after = request.args.get("after", "0")
    after = int(after) if after.isascii() and after.isdigit() and len(after) < 16 else 0
    found = [row_dict(r) for r in rows_after(db_session(), conversation.id, after)]
    return render_template("chat/_row_list.html", rows=found, conversation_id=conversation.id)


@bp.post("/chats/<int:conversation_id>/messages")
@login_required
@message_rate_limit
def send_message(conversation_id: int):
    """The composer. Errors come back as a banner the page shows (409, 413, 429...)."""
    conversation = owned_or_404(Conversation, conversation_id)
    settings = current_app.config["LOOPDESK"]
    message = (request.form.get("message") or "").strip()
    try:
        if not message:
            raise ApiError(400, "Write a message first.")
        if len(message) > settings.max_message_chars:
            raise ApiError(413, f"Messages can be at most {settings.max_message_chars} characters.")
        start_turn(conversation.id, message, None)
    except ApiError as error:
        return _banner_response(error.description, error.code, conversation.id, message)
    if not is_htmx():
        return redirect(url_for("chat.show", conversation_id=conversation.id))
    # The answer carries the new state too, so the page is right even before its socket is.
    db_session().refresh(conversation)
    return render_template(
        "chat/_composer.html", conversation_id=conversation.id, busy=True
    ) + render_template(
        "chat/_conversation_item.html", item=conversation, conversation=conversation, swap_oob=True
    )


def _banner_response(message: str, status: int, conversation_id: int, draft: str):
    if not is_htmx():
        return render_template("error.html", status=status, message=message), status
    # The composer keeps the draft; the banner says what went wrong.
    html = render_template(
        "chat/_composer.html", conversation_id=conversation_id, busy=False, draft=draft
    ) + render_template("chat/_banner.html", message=message, swap_oob=True)
    return make_response(html, status)


@bp.post("/chats/<int:conversation_id>/stop")
@login_required
def stop(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    stop_conversation(conversation.id)
    if is_htmx():
        return "", 204
    return redirect(url_for("chat.show", conversation_id=conversation.id))
