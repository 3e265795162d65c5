"""The conversation list and the chat page, and the first-run welcome step.

Onboarding: an account made through sign-up (`User.needs_onboarding`) that has neither
finished nor skipped /welcome is shown the welcome step instead of its chats: `/` renders
it in place (so the sign-up flash still shows there) and `/chats/<id>` redirects to
/welcome. Accounts made by an admin, the CLI or the tests are never asked. The empty chat
shows suggested first requests ("starters") as cards; each posts its prompt as the first
message."""

from __future__ import annotations

from flask import (
    Blueprint,
    abort,
    current_app,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required
from sqlalchemy import select

from app.accounts.models import User
from app.accounts.onboarding import default_starters, starters_for
from app.agents.onboarding import start_generation, starter_writers
from app.chat.attachments import pending_attachments
from app.chat.branches import NEVER_BRANCHED, branch_version, shown_rows
from app.chat.conversations import (
    conversation_dict,
    create_conversation,
    rename_conversation,
)
from app.chat.models import Conversation, Message
from app.chat.organize import listed_conversations, sidebar_context
from app.chat.presets import chat_preset
from app.chat.runs import IDLE_COMPOSER, composer_state
from app.chat.turn import Regenerate
from app.db import utcnow
from app.error_codes import ErrorCode
from app.events import ConversationChanged, ConversationDeleted
from app.web.access import (
    is_htmx,
    owned_before_waiting,
    owned_conversation,
    owned_conversation_for_turn,
    owned_or_404,
    requested_preset,
    requested_preset_id,
    shown_chat_id,
)
from app.web.chat_actions import (
    delete_conversation,
    edited_message,
    new_message,
    offered_model_name,
    start_turn,
    stop_conversation,
    store_request_uploads,
    switch_branch,
)
from app.web.composer import composer_html, stopped_rows_html
from app.web.errors import ApiError, error_response
from app.web.extensions import message_rate_limit, welcome_rate_limit
from app.web.forms import ChatTitleForm, ConfirmForm, WelcomeForm
from app.web.identity import db_session
from app.web.input_gate import id_from_text
from app.web.projects_pages import project_label
from app.web.queue_actions import read_now
from app.web.times import duration
from app.workspace.attachments import AttachmentRefused, human_size
from app.workspace.models import Attachment

bp = Blueprint("chat", __name__)
bp.add_app_template_global(shown_chat_id)
bp.record_once(lambda state: state.app.jinja_env.globals.update(idle_composer=IDLE_COMPOSER))


def _page(conversation: Conversation | None, new_chat: bool = False, preset_id: str | None = None):
    session = db_session()
    rows = shown_rows(session, conversation) if conversation else []
    preset = chat_preset(session, conversation) if conversation else requested_preset(preset_id)
    show = not rows and not (preset and preset.starters)  # a preset's own replace them
    starters, pending = starters_for(current_user) if show else ([], False)
    return render_template(
        "chat/page.html",
        **sidebar_context(session, current_user.id),
        conversation=conversation,
        new_chat=new_chat,  # (not `draft`: the composer prints a `draft` as its text)
        rows=rows,
        composer=composer_state(session, conversation.id) if conversation else None,
        form=ConfirmForm(),
        starters=starters,
        starters_pending=pending,
        branch_version=branch_version(conversation) if conversation else NEVER_BRANCHED,
        project_label=project_label(session, conversation),
        preset=preset,
    )


def _must_onboard() -> bool:
    return current_user.must_onboard


@bp.get("/")
@login_required
def index():
    """The conversation list, with the latest chat open (or the empty state)."""
    if _must_onboard():
        return _welcome_page(WelcomeForm(formdata=None))
    conversations = listed_conversations(db_session(), current_user.id)
    if conversations:
        return redirect(url_for("chat.show", conversation_id=conversations[0].id))
    return _page(None)


@bp.get("/chats/new")
@login_required
def draft():
    """ "+ New chat": an empty composer. Nothing is stored until the first message is sent
    (to /chats/start), so clicking it leaves no empty chat behind."""
    if _must_onboard():
        return redirect(url_for("chat.welcome"))
    return _page(None, new_chat=True, preset_id=request.args.get("preset"))  # from a preset


@bp.get("/chats/<int:conversation_id>")
@login_required
def show(conversation_id: int):
    """A chat's page: its rows, any waiting card, the live area and the composer."""
    conversation = owned_conversation(conversation_id)
    if _must_onboard():
        return redirect(url_for("chat.welcome"))
    read_now(conversation)  # opened: its unread dot goes, in every tab
    return _page(conversation)


# -- first run ------------------------------------------------------------------------------


def _welcome_page(form: WelcomeForm, status: int = 200):
    return render_template("onboarding/welcome.html", form=form), status


@bp.route("/welcome", methods=["GET", "POST"])
@login_required
@welcome_rate_limit
def welcome():
    """Role and company (and a website) for suggested first requests; or skip."""
    session = db_session()
    user = session.get(User, current_user.id)
    if request.method == "GET":
        data = {"role": user.role, "company": user.company, "website": user.website}
        return _welcome_page(WelcomeForm(formdata=None, data=data))
    form = WelcomeForm()
    if request.form.get("action") == "skip":  # (CSRF was checked before the view)
        if user.onboarded_at is None:
            user.onboarded_at = utcnow()
            user.starters = default_starters()
            session.commit()
        return redirect(url_for("chat.index"))
    if not form.validate_on_submit():
        return _welcome_page(form, 400)
    user.role = form.role.data
    user.company = form.company.data
    user.website = form.website.data or ""
    user.onboarded_at = utcnow()
    services = current_app.extensions["services"]
    writers = starter_writers(services.settings.onboarding_threads)
    if writers.is_running(user.id):
        # One job per account: the one under way reads the answers saved here.
        session.commit()
        return redirect(url_for("chat.index"))
    user.starters = []  # pending until the background job stores them
    session.commit()
    if start_generation(services, current_app.extensions["database"], user.id) is None:
        # The pool's queue is full (or a job began meanwhile): the defaults now.
        user.starters = user.starters or default_starters()
        session.commit()
    return redirect(url_for("chat.index"))


@bp.get("/welcome/starters")
@login_required
def starters():
    """The starters partial; the empty chat polls it while they are being written."""
    conversation_id = request.args.get("conversation", "")
    conversation = None
    if conversation_id:
        if id_from_text(conversation_id) is None:
            abort(404)
        conversation = owned_or_404(Conversation, id_from_text(conversation_id))
        has_rows = db_session().scalar(
            select(Message.id).where(Message.conversation_id == conversation.id).limit(1)
        )
        if has_rows is not None:
            return render_template("onboarding/_starters.html", starters=[], pending=False)
    session = db_session()
    found, pending = starters_for(session.get(User, current_user.id))
    return render_template(
        "onboarding/_starters.html", starters=found, pending=pending, conversation=conversation
    )


@bp.post("/chats/start")
@login_required
@message_rate_limit
def start():
    """A new chat with its first message: a draft's composer (/chats/new), or a starter's
    prompt. The chat exists from here on; then the browser goes to its page."""
    settings = current_app.config["LOOPDESK"]
    message = (request.form.get("message") or "").strip()
    if not message:
        raise ApiError(400, "Write a message first.")
    if len(message) > settings.max_message_chars:
        raise ApiError(413, f"Messages can be at most {settings.max_message_chars} characters.")
    preset_id = requested_preset_id(request.form.get("preset_id"))  # a draft's composer's
    model = offered_model_name(request.form.get("model") or None)  # its header's picker
    conversation = create_conversation(db_session(), current_user.id, preset_id=preset_id)
    conversation.model = model or conversation.model
    # One transaction: a refused turn (an ApiError, shown by the error handlers: the
    # banner, for htmx) leaves no chat behind.
    start_turn(conversation.id, new_message(message))
    return _go_to(url_for("chat.show", conversation_id=conversation.id), 201)


@bp.post("/chats")
@login_required
def create():
    """The old "New chat" form: opens a draft, which stores nothing until its first
    message (scripts create chats with POST /api/chats)."""
    return _go_to(url_for("chat.draft"), 200)


def _go_to(target: str, htmx_status: int):
    if is_htmx():
        response = make_response("", htmx_status)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target)


@bp.route("/chats/<int:conversation_id>/rename", methods=["GET", "POST"])
@login_required
def rename(conversation_id: int):
    """The rename form in the list (GET), and the new title (POST): the person's own."""
    conversation = owned_or_404(Conversation, conversation_id)
    form = ChatTitleForm(obj=conversation)
    if request.method == "POST":
        if not form.validate():
            return render_template(
                "chat/_rename_form.html", conversation=conversation, form=form
            ), 400
        rename_conversation(conversation, form.title.data)
        db_session().commit()
        # Every tab of the person follows: list items, and the header and tab title of
        # the tabs showing this chat.
        current_app.extensions["services"].hub.publish_user(
            current_user.id, ConversationChanged(conversation_dict(conversation))
        )
        if not is_htmx():
            return redirect(url_for("chat.show", conversation_id=conversation.id))
        html = render_template("chat/_conversation_item.html", item=conversation)
        if shown_chat_id() == conversation.id:
            html += render_template(
                "chat/_chat_title.html", title=conversation.title, swap_oob=True
            )
        return html
    return render_template("chat/_rename_form.html", conversation=conversation, form=form)


@bp.get("/chats/<int:conversation_id>/item")
@login_required
def item(conversation_id: int):
    """One conversation-list item (after a rename is cancelled)."""
    conversation = owned_or_404(Conversation, conversation_id)
    return render_template("chat/_conversation_item.html", item=conversation)


@bp.post("/chats/<int:conversation_id>/delete")
@login_required
def delete(conversation_id: int):
    """Delete the chat with its rows and runs (a reply being written is cancelled). Every
    tab of the person hears of it (the socket's `conversationDeleted`): the list item
    goes, and a tab showing the chat says it was deleted. This tab, showing it, goes to
    the chat list's first chat (or the empty state), its address with it."""
    conversation = owned_or_404(Conversation, conversation_id)
    delete_conversation(conversation.id)
    current_app.extensions["services"].hub.publish_user(
        current_user.id, ConversationDeleted(conversation.id)
    )
    if is_htmx():
        response = make_response("", 200)
        if shown_chat_id() == conversation.id:
            response.headers["HX-Redirect"] = url_for("chat.index")
        return response
    return redirect(url_for("chat.index"))


@bp.post("/chats/<int:conversation_id>/messages")
@login_required
@message_rate_limit
def send_message(conversation_id: int):
    """The composer. Errors come back as a banner the page shows (409, 413, 429...)."""
    conversation = owned_conversation_for_turn(conversation_id)
    settings = current_app.config["LOOPDESK"]
    message = (request.form.get("message") or "").strip()
    try:
        if not message:
            raise ApiError(400, "Write a message first.")
        if len(message) > settings.max_message_chars:
            raise ApiError(413, f"Messages can be at most {settings.max_message_chars} characters.")
        start_turn(conversation.id, new_message(message))
    except ApiError as error:
        return _banner_response(
            error.message, error.status, conversation.id, message, error.extra_headers
        )
    if not is_htmx():
        return redirect(url_for("chat.show", conversation_id=conversation.id))
    # The answer carries the new state too, so the page is right even before its socket is.
    db_session().refresh(conversation)
    html = (
        composer_html(conversation.id)
        + render_template("chat/_conversation_item.html", item=conversation, swap_oob=True)
        + render_template(
            "chat/_attachments.html", conversation_id=conversation.id, swap_oob=True
        )  # the files went with the message: no chips left
        + render_template("chat/_banner.html", message=None, swap_oob=True)
    )
    if request.form.get("starter"):
        # Sent from a starter card: the cards go.
        html += render_template("onboarding/_starters.html", starters=[], swap_oob=True)
    return html


def _banner_response(
    message: str, status: int, conversation_id: int, draft: str, headers: dict | None = None
):
    """`headers`: e.g. Retry-After on a 429, kept for the page as for scripts."""
    if not is_htmx():
        return render_template("error.html", status=status, message=message), status, headers or {}
    # The composer keeps the draft (in the run's state: a refusal may come while one
    # runs); the banner says what went wrong.
    html = composer_html(conversation_id, draft) + render_template(
        "chat/_banner.html", message=message, swap_oob=True
    )
    return make_response(html, status, headers or {})


# -- branches (app/chat/branches.py): the pager, Regenerate and Edit on rows ----------------


def _form_sequence() -> int:
    value = request.form.get("sequence", "")
    if not (value.isascii() and value.isdigit() and 0 < len(value) < 16) or int(value) == 0:
        raise ApiError(400, "Say which message.")
    return int(value)


@bp.post("/chats/<int:conversation_id>/regenerate")
@login_required
@message_rate_limit
def regenerate(conversation_id: int):
    """An answer's Regenerate button: a new answer beside the old one."""
    conversation = owned_conversation_for_turn(conversation_id)
    try:
        start_turn(conversation.id, Regenerate(_form_sequence()))
    except ApiError as error:
        return _banner_response(
            error.message, error.status, conversation.id, "", error.extra_headers
        )
    return _busy_response(conversation)


@bp.post("/chats/<int:conversation_id>/edit")
@login_required
@message_rate_limit
def edit(conversation_id: int):
    """A message edited in place: a new version beside the old one, answered anew."""
    conversation = owned_conversation_for_turn(conversation_id)
    settings = current_app.config["LOOPDESK"]
    message = (request.form.get("message") or "").strip()
    try:
        sequence = _form_sequence()
        if not message:
            raise ApiError(400, "Write a message first.")
        if len(message) > settings.max_message_chars:
            raise ApiError(413, f"Messages can be at most {settings.max_message_chars} characters.")
        start_turn(conversation.id, edited_message(sequence, message))
    except ApiError as error:
        return _banner_response(
            error.message, error.status, conversation.id, "", error.extra_headers
        )
    return _busy_response(conversation)


@bp.post("/chats/<int:conversation_id>/branch")
@login_required
def branch(conversation_id: int):
    """The pager's ‹ and ›: show another branch. The page's socket re-renders the rows
    (every tab's does), so htmx gets nothing to swap."""
    conversation = owned_conversation(conversation_id)
    try:
        switch_branch(conversation.id, _form_sequence())
    except ApiError as error:
        if not is_htmx():
            raise
        return error_response(error.status, error.code, error.message)
    if not is_htmx():
        return redirect(url_for("chat.show", conversation_id=conversation.id), 303)
    return "", 204


def _busy_response(conversation: Conversation):
    if not is_htmx():
        return redirect(url_for("chat.show", conversation_id=conversation.id), 303)
    db_session().refresh(conversation)
    return composer_html(conversation.id) + render_template(
        "chat/_conversation_item.html", item=conversation, swap_oob=True
    )


@bp.post("/chats/<int:conversation_id>/stop")
@login_required
def stop(conversation_id: int):
    """The Stop button: the reply being written ends, keeping what was shown. The page gets
    the composer as the run is now: idle once stopped, or the card the run paused on
    before the stop arrived (nothing was left to stop)."""
    conversation = owned_or_404(Conversation, conversation_id)
    stopped = stop_conversation(conversation.id)
    if is_htmx():
        return composer_html(conversation.id) + stopped_rows_html(conversation.id, stopped)
    return redirect(url_for("chat.show", conversation_id=conversation.id))


# -- attachments ----------------------------------------------------------------------------


@bp.app_template_global()
def conversation_attachments(conversation_id: int):
    """The chips above the composer: the files the person's next message goes with."""
    conversation = owned_or_404(Conversation, conversation_id)
    return pending_attachments(db_session(), conversation.id)


bp.add_app_template_filter(duration, "duration")
bp.add_app_template_filter(human_size, "filesize")


@bp.post("/chats/<int:conversation_id>/attachments")
@login_required
def upload_attachment(conversation_id: int):
    """The composer's Attach button, a drop or a paste (multipart, one or more `file`
    fields): stores the files and answers with the chips of the files the next message
    goes with (201). One refused file refuses them all (the banner says which)."""
    conversation = owned_before_waiting(Conversation, conversation_id)
    try:
        store_request_uploads(conversation.id, request.files.getlist("file"))
    except AttachmentRefused as refused:
        if refused.status == 404:
            abort(404)
        return error_response(refused.status, ErrorCode.ATTACHMENT_REFUSED, refused.message)
    if not is_htmx():
        return redirect(url_for("chat.show", conversation_id=conversation.id), 303)
    return _chips(conversation.id), 201


@bp.post("/chats/<int:conversation_id>/attachments/<int:attachment_id>/delete")
@login_required
def remove_attachment(conversation_id: int, attachment_id: int):
    """A chip's remove button: a file not sent yet is deleted; one already sent with a
    message stays (409)."""
    conversation = owned_or_404(Conversation, conversation_id)
    attachment = owned_or_404(Attachment, attachment_id)
    session = db_session()
    if attachment.conversation_id != conversation.id:
        abort(404)
    if attachment.id not in {a.id for a in pending_attachments(session, conversation.id)}:
        raise ApiError(409, f"{attachment.filename} was already sent and stays with its message.")
    session.delete(attachment)
    session.commit()
    if not is_htmx():
        return redirect(url_for("chat.show", conversation_id=conversation.id), 303)
    return _chips(conversation.id)


def _chips(conversation_id: int) -> str:
    """The chips, and an empty banner: a success clears an old error."""
    return render_template(
        "chat/_attachments.html",
        conversation_id=conversation_id,
        attachments=pending_attachments(db_session(), conversation_id),
    ) + render_template("chat/_banner.html", message=None, swap_oob=True)
