"""Taking data out: one conversation as Markdown or JSON, or everything as a zip
(docs/CONTRACT.md)."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify, request
from flask_login import current_user, login_required

from app.chat.export import FORMATS, export_conversation
from app.chat.models import Conversation
from app.chat.takeout import ArchiveTooLarge, build_archive
from app.db import read_transaction, utcnow
from app.error_codes import ErrorCode
from app.row_meta import Card
from app.web.access import owned_or_404
from app.web.cards import card_view
from app.web.errors import ApiError
from app.web.extensions import data_download_rate_limit
from app.web.identity import db_session
from app.web.offload import off_the_loop
from app.web.openapi import Param, documented
from app.web.shapes import ChatExport

bp = Blueprint("export", __name__)
EXPORT_QUERY = (Param("format", {"type": "string", "enum": list(FORMATS)}, "md (default) or json"),)


def answered_summary(card: Card) -> list[dict]:
    """How a card reads once answered, exactly as the chat page shows it."""
    return card_view(card)["summary"]


@bp.get("/chats/<int:conversation_id>/export")
@bp.get("/api/chats/<int:conversation_id>/export", endpoint="export_chat_api")
@documented(
    "GET",
    "A chat as Markdown or JSON",
    media_type="text/markdown",
    also={"application/json": ChatExport},
    query=EXPORT_QUERY,
)
@login_required
def export_chat(conversation_id: int):
    chosen = request.args.get("format", "md")
    if chosen not in FORMATS:
        raise ApiError(400, "'format' must be 'md' or 'json'.", ErrorCode.INVALID_FIELD)
    session = db_session()
    with read_transaction(session):
        exported = export_conversation(session, owned_or_404(Conversation, conversation_id))
    if chosen == "json":
        response = jsonify(exported.as_json())
    else:
        response = Response(exported.as_markdown(answered_summary), mimetype="text/markdown")
    filename = f"loopdesk-chat-{conversation_id}.{chosen}"
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@bp.get("/settings/data.zip")
@bp.get("/api/export", endpoint="download_all_api")
@documented(
    "GET",
    "All your data as a zip",
    media_type="application/zip",
    errors=(ErrorCode.DOWNLOAD_TOO_LARGE, ErrorCode.RATE_LIMITED),
)
@login_required
@data_download_rate_limit
def download_all():
    """Every chat, output, asset, attachment, workspace record and the memory. The zip is
    built off the serving loop (seconds of compression for a large account), then sent
    from its temporary file."""
    database = current_app.extensions["database"]
    max_bytes = current_app.config["LOOPDESK"].data_download_max_bytes
    try:
        archive = off_the_loop(
            build_archive, database, current_user.id, answered_summary, max_bytes
        )
    except ArchiveTooLarge as too_large:
        raise ApiError(413, str(too_large), ErrorCode.DOWNLOAD_TOO_LARGE) from None
    size = archive.seek(0, 2)
    archive.seek(0)
    response = Response(_chunks(archive), mimetype="application/zip")
    response.headers["Content-Length"] = str(size)
    response.headers["Content-Disposition"] = (
        f'attachment; filename="loopdesk-data-{utcnow():%Y-%m-%d}.zip"'
    )
    response.headers["Cache-Control"] = "no-store"
    return response


def _chunks(archive, size: int = 64 * 1024):
    """The archive's bytes; its temporary file is closed once they are sent."""
    try:
        while chunk := archive.read(size):
            yield chunk
    finally:
        archive.close()
