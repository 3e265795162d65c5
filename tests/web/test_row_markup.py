"""What every chat row carries besides its content: the time it was written, a host
message's Markdown source and its answer's copy button, code blocks with their language, and the
day separators of a chat spanning days."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from app.chat.models import Message
from app.chat.rows import insert_message
from app.web.times import day_label, utc_clock, utc_day, utc_iso
from tests.factories import add_conversation
from tests.web.helpers import database


def _rows(app, conversation_id, *rows):
    """(kind, content, days ago) rows, written that many days before now (UTC)."""
    now = datetime.utcnow().replace(microsecond=0)
    with database(app).session() as session:
        for kind, content, days_ago in rows:
            row = insert_message(
                session,
                conversation_id,
                role="user" if kind == "user" else "assistant",
                kind=kind,
                content=content,
            )
            session.flush()
            session.get(Message, row.id).created_at = now - timedelta(days=days_ago)
        session.commit()
    return now


def test_every_row_has_its_time_as_a_utc_datetime(app, client, user):
    chat = add_conversation(app, user)
    now = _rows(app, chat, ("user", "hello", 0), ("host", "Hi **there**", 0))
    html = client.get(f"/chats/{chat}").get_data(as_text=True)
    written = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    times = re.findall(r'<time class="row-time" datetime="([^"]+)"[^>]*>([^<]+)</time>', html)
    assert times == [(written, written[11:16])] * 2


def test_a_host_message_has_a_copy_button_and_its_markdown_source(app, client, user):
    chat = add_conversation(app, user)
    source = "## Plan\n\n<script>alert(1)</script> & **bold**\n\n```python\nprint(1)\n```"
    _rows(app, chat, ("user", "plan please", 0), ("host", source, 0))
    html = client.get(f"/chats/{chat}").get_data(as_text=True)
    user_row, host_row = re.findall(r"<article .*?</article>", html, re.S)
    assert "data-copy" not in user_row
    assert 'data-copy="answer" aria-label="Copy this answer as Markdown"' in host_row
    template = re.search(r'<template class="row-markdown">(.*?)</template>', host_row, re.S)[1]
    assert template == (
        "## Plan\n\n&lt;script&gt;alert(1)&lt;/script&gt; &amp; **bold**\n\n"
        "```python\nprint(1)\n```"
    )
    assert '<span class="code-lang">python</span>' in host_row
    assert 'data-copy="code" aria-label="Copy python code"' in host_row
    assert "<script>" not in host_row


def test_a_chat_spanning_days_has_a_separator_before_each_day(app, client, user):
    chat = add_conversation(app, user)
    now = _rows(
        app,
        chat,
        ("user", "long ago", 9),
        ("host", "answer long ago", 9),
        ("user", "yesterday", 1),
        ("user", "today", 0),
        ("host", "answer today", 0),
    )
    html = client.get(f"/chats/{chat}").get_data(as_text=True)
    rows = html[html.index('id="rows"') : html.index("</div>\n", html.index("m-5"))]
    order = re.findall(r'<h2 class="day-sep"><time datetime="([^"]+)">([^<]+)|id="(m-\d)"', rows)
    shown = [label or row for _, label, row in order]
    long_ago = (now - timedelta(days=9)).date()
    assert shown == [
        day_label(long_ago.isoformat()),
        "m-1",
        "m-2",
        "Yesterday",
        "m-3",
        "Today",
        "m-4",
        "m-5",
    ]
    assert order[0][0] == long_ago.isoformat()


def test_times_and_day_labels():
    assert utc_iso("2025-03-12T10:04:05.123456Z") == "2025-03-12T10:04:05Z"
    assert utc_iso(datetime(2025, 3, 12, 10, 4, 5)) == "2025-03-12T10:04:05Z"
    assert utc_clock("2025-03-12T10:04:05Z") == "10:04"
    assert utc_day("2025-03-12T23:59:59Z") == "2025-03-12"
    assert utc_iso("not a time") == utc_iso(None) == ""
    today = date(2025, 3, 12)
    assert day_label("2025-03-12", today) == "Today"
    assert day_label("2025-03-11", today) == "Yesterday"
    assert day_label("2025-03-03", today) == "Monday 3 March 2025"
