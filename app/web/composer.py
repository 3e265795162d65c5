"""The composer as an answer carries it: the run's state as the server has it now
(docs/CONTRACT.md, the composer's `data-state` and `data-version`)."""

from __future__ import annotations

from flask import render_template

from app.chat.conversations import row_dict
from app.chat.queue import queue_items
from app.chat.runs import composer_state
from app.chat.stop import Stopped
from app.db import read_transaction
from app.web.identity import db_session


def composer_html(conversation_id: int, draft: str | None = None) -> str:
    """The composer as the server knows the chat's run now (out of band): every answer
    that may change the run's state carries it, whatever the person's action was."""
    session = db_session()
    session.expire_all()
    with read_transaction(session):
        state = composer_state(session, conversation_id)
        queued = queue_items(session, conversation_id)
    return render_template(
        "chat/_composer.html",
        conversation_id=conversation_id,
        state=state,
        draft=draft,
        swap_oob=True,
    ) + render_template(
        "chat/_queue.html",
        conversation_id=conversation_id,
        state=state,
        queued=queued,
        swap_oob=True,
    )


def stopped_rows_html(conversation_id: int, stopped: Stopped | None) -> str:
    """What a stop kept, as the answer shows it (out of band): the rows it kept appended
    and the live text emptied, so the idle composer never sits beside text still shown as
    being written. The socket sends the same rows; rows are keyed by sequence, so its copy
    replaces this one (static/app.js)."""
    if stopped is None:
        return ""
    rows = [row_dict(row) for row in stopped.rows]
    html = render_template("chat/_live_text.html", parts=None, swap_oob=True)
    if rows:
        html += render_template(
            "chat/_rows.html", rows=rows, conversation_id=conversation_id, swap="beforeend"
        )
    return html
