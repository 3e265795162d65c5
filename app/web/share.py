"""Share links (app/chat/shares.py): the owner's API and Share menu, the shared page
`/s/<token>` that works logged out, and "Continue in a chat of my own".

The token is in the shared page's path, so that page (and its 404) is sent with
`Referrer-Policy: no-referrer` (its links and posts never carry it elsewhere, nor to our
own logs as a Referer) and `X-Robots-Tag: noindex`; request logs show the path with the
token replaced (app/web/log_redaction.py)."""

from __future__ import annotations

from typing import Annotated

from flask import (
    Blueprint,
    abort,
    jsonify,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required
from pydantic import BaseModel, BeforeValidator, Field

from app.chat.models import ChatShare, Conversation
from app.chat.shares import (
    MAX_EXPIRES_DAYS,
    NothingToCopy,
    copy_shared,
    create_share,
    live_share,
    revoke_share,
    shared_by_token,
    shared_rows,
)
from app.web.access import is_htmx, owned_or_404
from app.web.api import body_of
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.openapi import documented
from app.web.shapes import Body

bp = Blueprint("share", __name__)


# What the API takes and answers (beside its routes: app/web/shapes.py is full).


def _whole_number(value: object) -> object:
    """JSON Schema's integer takes 7.0 as 7 (as app/web/shapes.py's bodies do)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


class ShareCreate(Body):
    expires_days: (
        Annotated[int, Field(ge=1, le=MAX_EXPIRES_DAYS), BeforeValidator(_whole_number)] | None
    ) = Field(None, description="Days until the link stops working; none: never")


class ShareCreated(BaseModel):
    url: str = Field(description="The read-only link; shown once (only its digest is kept)")
    expires_at: str | None


class ShareState(BaseModel):
    shared: bool = Field(description="Whether the chat has a live link")
    created_at: str | None
    expires_at: str | None


# The Share menu's expiry choices: "" (never) or a number of days.
EXPIRY_CHOICES = (("", "Never"), ("1", "1 day"), ("7", "7 days"), ("30", "30 days"))
SHARED_PAGE_ENDPOINTS = frozenset({"share.view", "share.continue_chat"})
bp.record_once(
    lambda state: state.app.jinja_env.globals.update(share_expiry_choices=EXPIRY_CHOICES)
)


@bp.after_request
def _private_page(response):
    """The shared page and its 404 name the token in their address: nothing of it leaves
    (no Referer), and search engines keep it out of their index."""
    if request.endpoint in SHARED_PAGE_ENDPOINTS:
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Robots-Tag"] = "noindex, nofollow"
        response.headers["Cache-Control"] = "no-store"
    return response


def _link(raw: str) -> str:
    return url_for("share.view", token=raw, _external=True)


def _time(value) -> str | None:
    return value.isoformat() + "Z" if value is not None else None


# -- the owner's JSON API -------------------------------------------------------------------


@bp.post("/api/chats/<int:conversation_id>/share")
@documented(
    "POST",
    "Make the chat's read-only link (replacing the old one)",
    response=ShareCreated,
    status=201,
    body=ShareCreate,
    body_required=False,
    description="The link is shown once: only its digest is kept. A chat has one live "
    "link; making one revokes the one before. `expires_days`: 1..365, or none (never).",
)
@login_required
def create(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    body = body_of(ShareCreate, None if request.content_length else {})
    share, raw = _make(conversation, body.expires_days)
    return jsonify({"url": _link(raw), "expires_at": _time(share.expires_at)}), 201


@bp.get("/api/chats/<int:conversation_id>/share")
@documented("GET", "Whether the chat has a live link, and its expiry", response=ShareState)
@login_required
def state(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    return jsonify(_state(live_share(db_session(), conversation.id)))


@bp.delete("/api/chats/<int:conversation_id>/share")
@documented("DELETE", "Revoke the chat's link (it answers 404 from now on)", status=204)
@login_required
def revoke(conversation_id: int):
    conversation = owned_or_404(Conversation, conversation_id)
    session = db_session()
    revoke_share(session, conversation.id)
    session.commit()
    return "", 204


def _make(conversation: Conversation, expires_days: int | None) -> tuple[ChatShare, str]:
    session = db_session()
    share, raw = create_share(session, conversation, current_user.id, expires_days)
    session.commit()
    return share, raw


def _state(share: ChatShare | None) -> dict:
    return {
        "shared": share is not None,
        "created_at": _time(share.created_at) if share else None,
        "expires_at": _time(share.expires_at) if share else None,
    }


# -- the chat page's Share menu (htmx; each answer is the menu's panel) ---------------------


def _panel(
    conversation: Conversation, new_link: str | None = None, status: int = 200, revoked=False
):
    """`revoked`: the focus goes to "Make a link" (the Revoke button is gone)."""
    html = render_template(
        "chat/_share.html",
        conversation=conversation,
        share=live_share(db_session(), conversation.id),
        new_link=new_link,
        revoked=revoked,
    )
    return make_response(html, status)


@bp.app_template_global()
def chat_share(conversation_id: int) -> ChatShare | None:
    """The chat's live link, for the Share menu the chat page renders."""
    return live_share(db_session(), conversation_id)


@bp.post("/chats/<int:conversation_id>/share")
@login_required
def create_from_page(conversation_id: int):
    """The menu's "Make a link" (form field `expires`: "" or a number of days)."""
    conversation = owned_or_404(Conversation, conversation_id)
    days = _form_expiry()
    _share, raw = _make(conversation, days)
    if not is_htmx():
        return _panel_page(conversation, _link(raw))
    return _panel(conversation, _link(raw), 201)


def _form_expiry() -> int | None:
    expires = request.form.get("expires", "")
    if not expires:
        return None
    if expires.isascii() and expires.isdigit() and len(expires) <= 3:
        days = int(expires)
        if 1 <= days <= MAX_EXPIRES_DAYS:
            return days
    raise ApiError(400, f"Choose when the link expires: never, or in 1 to {MAX_EXPIRES_DAYS} days.")


@bp.post("/chats/<int:conversation_id>/share/revoke")
@login_required
def revoke_from_page(conversation_id: int):
    """The menu's "Revoke the link": the link answers 404 from now on."""
    conversation = owned_or_404(Conversation, conversation_id)
    session = db_session()
    revoke_share(session, conversation.id)
    session.commit()
    if not is_htmx():
        return redirect(url_for("chat.show", conversation_id=conversation.id), 303)
    return _panel(conversation, revoked=True)


def _panel_page(conversation: Conversation, new_link: str):
    """Without script: the new link on a page of its own (it is shown once)."""
    return render_template("share/made.html", conversation=conversation, new_link=new_link), 201


# -- the shared page ------------------------------------------------------------------------


def _shared_or_404(token: str):
    shared = shared_by_token(db_session(), token)
    if shared is None:
        abort(404)  # revoked, expired, unknown: the same page
    return shared


@bp.get("/s/<token>")
def view(token: str):
    """The shared chat, read-only, for anyone with the link (logged in or not)."""
    shared = _shared_or_404(token)
    return render_template(
        "share/page.html",
        conversation=shared.conversation,
        rows=shared_rows(db_session(), shared.conversation),
        token=token,
    )


@bp.post("/s/<token>/continue")
def continue_chat(token: str):
    """A copy of the shared branch (up to the shown row `sequence`, by default the last)
    in a new chat of the viewer, who goes there. Logged out: the login page, which comes
    back to the shared page."""
    session = db_session()
    shared = _shared_or_404(token)
    if not current_user.is_authenticated:
        return redirect(url_for("auth.login", next=url_for("share.view", token=token)), 303)
    upto = _form_sequence()
    try:
        copied = copy_shared(session, shared.conversation, current_user.id, upto)
    except NothingToCopy:
        session.rollback()
        abort(404)
    session.commit()
    target = url_for("chat.show", conversation_id=copied.id)
    if is_htmx():
        response = make_response("", 201)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target, 303)


def _form_sequence() -> int | None:
    value = request.form.get("sequence", "")
    if not value:
        return None
    if not (value.isascii() and value.isdigit() and len(value) < 16) or int(value) == 0:
        raise ApiError(400, "Say which message to continue from.")
    return int(value)
