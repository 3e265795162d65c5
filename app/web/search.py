"""Search across one's chats: the JSON API and the page's active search (docs/CONTRACT.md)."""

from __future__ import annotations

import re

from flask import Blueprint, jsonify, render_template, request, url_for
from flask_login import current_user, login_required
from markupsafe import Markup, escape
from sqlalchemy import select

from app.chat.models import Conversation
from app.chat.search import MAX_OFFSET, ChatHits, Hit, SearchPage, search
from app.db import read_transaction
from app.error_codes import ErrorCode
from app.web.access import is_htmx
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.openapi import Param, digits, documented
from app.web.shapes import NOT_BLANK, SearchOut

bp = Blueprint("search", __name__)

MAX_QUERY_CHARS = 200
MAX_LIMIT = 50
PAGE_LIMIT = 8  # hits under the page's search box
SEARCH_QUERY = (
    Param(
        "q",
        {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "pattern": NOT_BLANK},
        required=True,
    ),
    Param("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}),
    Param("cursor", digits(5, "next_cursor of a page (past the last page: no hits)")),
)


@bp.get("/api/search")
@documented("GET", "Search your chats", response=SearchOut, query=SEARCH_QUERY)
@login_required
def api_search():
    query = request.args.get("q", "")
    if not query.strip():
        raise ApiError(400, "Send what to look for in 'q'.", ErrorCode.INVALID_FIELD)
    return jsonify(search_dict(query, _limit(), _cursor()))


def search_dict(query: str, limit: int = 20, offset: int = 0) -> dict:
    """A page of hits as the API (and the MCP server's search_chats) answers it."""
    found = _search(query, limit, offset)
    archived = _archived(found)
    return {
        "hits": [_hit_dict(hit) for hit in found.hits],
        "chats": [_chat_dict(chat, chat.conversation_id in archived) for chat in found.chats],
        "next_cursor": str(found.next_offset) if found.next_offset is not None else None,
    }


@bp.get("/search")
@login_required
def results():
    """The hits under the search box (htmx), or a page of them without script."""
    query = request.args.get("q", "").strip()
    found = _search(query, PAGE_LIMIT, 0) if query else None
    template = "chat/_search_results.html" if is_htmx() else "chat/search.html"
    return render_template(template, query=query, found=found, archived=_archived(found))


def _archived(found: SearchPage | None) -> set[int]:
    """Which of the chats found are archived: their hits say so (they are not in the list)."""
    if not found or not found.chats:
        return set()
    ids = [chat.conversation_id for chat in found.chats]
    return set(
        db_session().scalars(
            select(Conversation.id).where(
                Conversation.id.in_(ids), Conversation.archived_at.is_not(None)
            )
        )
    )


def _search(query: str, limit: int, offset: int):
    if len(query) > MAX_QUERY_CHARS:
        raise ApiError(
            400, f"'q' is longer than {MAX_QUERY_CHARS} characters.", ErrorCode.INVALID_FIELD
        )
    if offset > MAX_OFFSET:  # past the deepest page search reads
        return SearchPage([], None)
    session = db_session()
    with read_transaction(session):
        return search(session, current_user.id, query, limit, offset)


def _limit() -> int:
    raw = request.args.get("limit", "20")
    if not re.fullmatch(r"[0-9]{1,3}", raw) or not 1 <= int(raw) <= MAX_LIMIT:
        raise ApiError(
            400, f"'limit' must be a whole number from 1 to {MAX_LIMIT}.", ErrorCode.INVALID_FIELD
        )
    return int(raw)


def _cursor() -> int:
    raw = request.args.get("cursor", "0")
    if not re.fullmatch(r"[0-9]{1,5}", raw):
        raise ApiError(400, "'cursor' is not one this API gave out.", ErrorCode.INVALID_FIELD)
    return int(raw)


def hit_url(hit: Hit) -> str:
    url = url_for("chat.show", conversation_id=hit.conversation_id)
    return url if hit.sequence is None else f"{url}#m-{hit.sequence}"


def _hit_dict(hit: Hit) -> dict:
    return {
        "chat": {"id": hit.conversation_id, "title": hit.title},
        "sequence": hit.sequence,
        "kind": hit.kind,
        "snippet": hit.snippet,
        "highlights": [list(mark) for mark in hit.highlights],
        "at": hit.at.isoformat() + "Z",
        "url": hit_url(hit),
    }


def _chat_dict(chat: ChatHits, archived: bool) -> dict:
    return {
        "chat": {"id": chat.conversation_id, "title": chat.title},
        "url": url_for("chat.show", conversation_id=chat.conversation_id),
        "title_matched": chat.title_hit is not None,
        "archived": archived,
        "sequences": [hit.sequence for hit in chat.rows],
    }


@bp.app_template_filter("highlighted")
def highlighted(hit: Hit) -> Markup:
    """The snippet, escaped, with its matched words in <mark>."""
    parts, last = [], 0
    for start, end in hit.highlights:
        if start < last:
            continue
        parts.append(escape(hit.snippet[last:start]))
        parts.append(Markup("<mark>") + escape(hit.snippet[start:end]) + Markup("</mark>"))
        last = end
    parts.append(escape(hit.snippet[last:]))
    return Markup("").join(parts)


@bp.app_template_global("hit_url")
def _hit_url_global(hit: Hit) -> str:
    return hit_url(hit)
