"""Search over one person's chats: their titles and the text of the rows they can see.

Hidden rows (tool results, tool-turn text) are never indexed, and every query is joined
to the person's own conversations, so neither can come back. One function answers on
both databases (FTS5 on SQLite, a tsvector under GIN on PostgreSQL), ranked by each
database's own measure (bm25, ts_rank); see app/chat/search_index.py for the tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, select, text
from sqlalchemy.orm import Session

from app.accounts.projects import member_projects
from app.chat.models import Conversation, Message
from app.chat.search_index import POSTGRES_CONFIG, TABLE
from app.chat.shapes import card_summary
from app.kinds import OutputKind, RowKind
from app.row_meta import AgentOutput, Card, card_in, output_in

MAX_TERMS = 8
MAX_INDEXED_CHARS = 20_000
TITLE_HITS = 5  # chats whose title matches, ahead of the first page of rows
MAX_OFFSET = 10_000
# Rows are ranked in batches of the newest matches: a common word costs one batch.
RANKED_BATCH = 200
# Private-use characters mark the matched words in a snippet: never typed, never markup.
MARK_START, MARK_END = "\ue000", "\ue001"
_TERM = re.compile(r"[^\W_]+", re.UNICODE)
# Output fields that are ids, states and addresses, not words a person reads.
_ID_KEYS = {"toolUseId", "tool", "status", "type", "id", "outputId", "agent", "offerId"}
_ADDRESS_KEYS = {"assetId", "asset_id", "url", "thumbnail", "src", "path", "href"}
_NOT_TEXT_KEYS = _ID_KEYS | _ADDRESS_KEYS
# A value that is an address or a path (an asset's, a page's), not words.
_ADDRESS = re.compile(r"\s*(?:/[\w./-]*|[a-z][a-z0-9+.-]*://\S*)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Hit:
    conversation_id: int
    title: str
    sequence: int | None  # None: the chat's title matched
    kind: str | None
    snippet: str
    highlights: tuple[tuple[int, int], ...]  # [start, end) of each matched word
    at: datetime


@dataclass(frozen=True)
class ChatHits:
    """One chat's hits on a page: whether its title matched, and its rows, best first."""

    conversation_id: int
    title: str
    title_hit: Hit | None
    rows: list[Hit]


@dataclass(frozen=True)
class SearchPage:
    hits: list[Hit]  # grouped: each chat's hits together, chats in the order of their best
    next_offset: int | None
    chats: list[ChatHits] = field(default_factory=list)


def grouped(hits: list[Hit]) -> list[ChatHits]:
    """Hits gathered by chat, each chat where its best hit was, its rows in rank order."""
    order: dict[int, tuple[Hit | None, list[Hit]]] = {}
    titles: dict[int, str] = {}
    for hit in hits:
        title_hit, rows = order.setdefault(hit.conversation_id, (None, []))
        titles.setdefault(hit.conversation_id, hit.title)
        if hit.sequence is None:
            order[hit.conversation_id] = (hit, rows)
        elif all(row.sequence != hit.sequence for row in rows):
            rows.append(hit)
    return [
        ChatHits(chat_id, titles[chat_id], title_hit, rows)
        for chat_id, (title_hit, rows) in order.items()
    ]


def search_terms(query: str) -> list[str]:
    """The words of a query (punctuation and FTS operators dropped), at most MAX_TERMS."""
    return _TERM.findall(query.lower())[:MAX_TERMS]


def search(
    session: Session, user_id: int, query: str, limit: int = 20, offset: int = 0
) -> SearchPage:
    """Ranked hits for `query` among `user_id`'s chats. The first page begins with up to
    TITLE_HITS chats whose title has every word; rows follow, `limit` a page."""
    terms = search_terms(query)
    if not terms:
        return SearchPage([], None)
    rows = _row_hits(session, user_id, terms, limit + 1, offset)
    more = len(rows) > limit
    hits = (_title_hits(session, user_id, terms) if offset == 0 else []) + rows[:limit]
    chats = grouped(hits)
    flat = [
        hit for chat in chats for hit in ([chat.title_hit] if chat.title_hit else []) + chat.rows
    ]
    return SearchPage(flat, offset + limit if more else None, chats)


def index_row(session: Session, row: Message, *, new: bool = False) -> None:
    """Put a row's searchable text in the index, or take it out when hidden. Called in the
    transaction that writes the row; `new`: just inserted, so nothing to replace."""
    body = "" if row.hidden else searchable_text(row.kind, row.content, row.meta)
    sqlite = session.get_bind().dialect.name == "sqlite"
    if sqlite and not new:
        session.execute(_SQLITE_UNINDEX, {"id": row.id})
    if not sqlite and not body:
        if not new:
            session.execute(_POSTGRES_UNINDEX, {"id": row.id})
        return
    if not body:
        return
    session.execute(_SQLITE_INDEX if sqlite else _POSTGRES_INDEX, {"id": row.id, "body": body})


# Run with every row written: built once.
_SQLITE_UNINDEX = text(f"DELETE FROM {TABLE} WHERE rowid = :id")
_POSTGRES_UNINDEX = text(f"DELETE FROM {TABLE} WHERE message_id = :id")
_SQLITE_INDEX = text(f"INSERT INTO {TABLE} (rowid, body) VALUES (:id, :body)")
_POSTGRES_INDEX = text(
    f"INSERT INTO {TABLE} (message_id, body) VALUES (:id, :body)"
    " ON CONFLICT (message_id) DO UPDATE SET body = excluded.body"
)


def searchable_text(kind: str, content: str, meta: Mapping[str, Any]) -> str:
    """What a person reads on a row, as they read it: its text; a card's title, reason,
    questions and the labels of the answer chosen (never its options' values, pictures
    or submit button); an agent output's title and the words of its fields; an image's
    title (never its address). A line already there is not repeated."""
    parts = [content or ""]
    card, output = card_in(meta), output_in(meta)
    if kind == RowKind.CARD and card is not None:
        parts.extend(_card_text(card))
    if kind == RowKind.AGENT_OUTPUT and output is not None:
        parts.extend(_output_text(output))
    seen: set[str] = set()
    kept = []
    for part in parts:
        key = " ".join(part.split()).lower()
        if key and key not in seen:
            seen.add(key)
            kept.append(part)
    return "\n".join(kept)[:MAX_INDEXED_CHARS]


def _card_text(card: Card) -> Iterator[str]:
    yield str(card.get("title") or "")
    yield str(card.get("reason") or "")
    try:
        summary = card_summary(card)
    except (KeyError, TypeError, AttributeError):  # a malformed card: its title is enough
        return
    for step in summary:
        yield str(step.get("title") or "")
        yield from (str(label) for label in step.get("answers") or [])


def _output_text(output: AgentOutput) -> Iterator[str]:
    yield str(output.get("title") or "")
    if output.get("kind") == OutputKind.IMAGE:
        return  # an image row shows its title and the picture, nothing else
    yield str(output.get("agentName") or "")
    yield from _strings(output.get("content"))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if not _ADDRESS.match(value):
            yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _NOT_TEXT_KEYS:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _row_hits(
    session: Session, user_id: int, terms: list[str], limit: int, offset: int
) -> list[Hit]:
    sqlite = session.get_bind().dialect.name == "sqlite"
    statement = _SQLITE_ROWS if sqlite else _POSTGRES_ROWS
    match = (
        " ".join(f'"{term}"*' for term in terms)
        if sqlite
        else " & ".join(f"{term}:*" for term in terms)
    )
    offset = min(offset, MAX_OFFSET)
    found = session.execute(
        statement,
        {
            "match": match,
            "user_id": user_id,
            "limit": limit,
            "offset": offset,
            # Only the batches this page reaches are read and ranked.
            "window": (offset + limit + RANKED_BATCH - 1) // RANKED_BATCH * RANKED_BATCH,
            "batch": RANKED_BATCH,
            "mark_start": MARK_START,
            "mark_end": MARK_END,
            "headline": f"StartSel={MARK_START}, StopSel={MARK_END}, MaxWords=24, "
            "MinWords=10, MaxFragments=1, FragmentDelimiter=…",
        },
    )
    return [
        Hit(r.conversation_id, r.title, r.sequence, r.kind, *_highlighted(r.snippet), r.created_at)
        for r in found
    ]


# Both read the person's matching rows newest first (the index walked in id order, each
# row joined to its chat and the person's projects, so only readable rows count), stop at
# `window`, and rank each batch of RANKED_BATCH by the database's measure: a word in every
# row costs a batch, not every row. Snippets (SQLite's as it reads a row, PostgreSQL's
# ts_headline) are made for the rows read, never for every match.
_SQLITE_ROWS = text(
    f"""
    WITH recent AS (
        SELECT {TABLE}.rowid AS id, bm25({TABLE}) AS score,
               snippet({TABLE}, 0, :mark_start, :mark_end, '…', 16) AS snippet
        FROM {TABLE}
        JOIN messages AS m ON m.id = {TABLE}.rowid
        JOIN conversations AS c ON c.id = m.conversation_id
        WHERE {TABLE} MATCH :match AND c.user_id = :user_id
          AND EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = c.project_id AND pm.user_id = :user_id)
        ORDER BY {TABLE}.rowid DESC
        LIMIT :window
    ), ranked AS (
        SELECT id, score, snippet, (row_number() OVER (ORDER BY id DESC) - 1) / :batch AS batch
        FROM recent
    )
    SELECT m.conversation_id, m.sequence, m.kind, m.created_at, c.title, ranked.snippet
    FROM ranked
    JOIN messages AS m ON m.id = ranked.id
    JOIN conversations AS c ON c.id = m.conversation_id
    ORDER BY ranked.batch, ranked.score, ranked.id DESC
    LIMIT :limit OFFSET :offset
    """
).columns(created_at=DateTime())
_POSTGRES_ROWS = text(
    f"""
    WITH recent AS (
        SELECT s.message_id AS id, s.document
        FROM {TABLE} AS s
        JOIN messages AS m ON m.id = s.message_id
        JOIN conversations AS c ON c.id = m.conversation_id
        WHERE s.document @@ to_tsquery('{POSTGRES_CONFIG}', :match) AND c.user_id = :user_id
          AND EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = c.project_id AND pm.user_id = :user_id)
        ORDER BY s.message_id DESC
        LIMIT :window
    ), page AS (
        SELECT id, ts_rank(document, to_tsquery('{POSTGRES_CONFIG}', :match)) AS score,
               (row_number() OVER (ORDER BY id DESC) - 1) / :batch AS batch
        FROM recent
        ORDER BY batch, score DESC, id DESC
        LIMIT :limit OFFSET :offset
    )
    SELECT m.conversation_id, m.sequence, m.kind, m.created_at, c.title,
           ts_headline('{POSTGRES_CONFIG}', s.body, to_tsquery('{POSTGRES_CONFIG}', :match),
                       :headline) AS snippet
    FROM page
    JOIN {TABLE} AS s ON s.message_id = page.id
    JOIN messages AS m ON m.id = page.id
    JOIN conversations AS c ON c.id = m.conversation_id
    ORDER BY page.batch, page.score DESC, page.id DESC
    """
).columns(created_at=DateTime())


def _title_hits(session: Session, user_id: int, terms: list[str]) -> list[Hit]:
    """A person's chats are few: their titles are matched word by word, not indexed."""
    conditions = [Conversation.title.ilike(f"%{_escaped(term)}%", escape="\\") for term in terms]
    chats = session.execute(
        select(Conversation.id, Conversation.title, Conversation.updated_at)
        .where(
            Conversation.user_id == user_id,
            Conversation.project_id.in_(member_projects(user_id)),
            *conditions,
        )
        .order_by(Conversation.updated_at.desc())
        .limit(TITLE_HITS)
    )
    return [
        Hit(
            chat.id,
            chat.title,
            None,
            None,
            chat.title,
            _title_marks(chat.title, terms),
            chat.updated_at,
        )
        for chat in chats
    ]


def _escaped(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _title_marks(title: str, terms: list[str]) -> tuple[tuple[int, int], ...]:
    lowered = title.lower()
    marks = []
    for term in terms:
        start = lowered.find(term)
        if start >= 0:
            marks.append((start, start + len(term)))
    return tuple(sorted(marks))


def _highlighted(snippet: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The snippet's plain text and where its marked words are."""
    plain: list[str] = []
    marks: list[tuple[int, int]] = []
    length, start = 0, None
    for piece in re.split(f"([{MARK_START}{MARK_END}])", snippet or ""):
        if piece == MARK_START:
            start = length
        elif piece == MARK_END:
            if start is not None and length > start:
                marks.append((start, length))
            start = None
        else:
            plain.append(piece)
            length += len(piece)
    return "".join(plain), tuple(marks)
