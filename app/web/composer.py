"""The composer as an answer carries it: the run's state as the server has it now
(docs/CONTRACT.md, the composer's `data-state` and `data-version`)."""

from __future__ import annotations

from flask import render_template

from app.chat.runs import composer_state
from app.db import read_transaction
from app.web.identity import db_session


def composer_html(conversation_id: int, draft: str | None = None) -> str:
    """The composer as the server knows the chat's run now (out of band): every answer
    that may change the run's state carries it, whatever the person's action was."""
    session = db_session()
    session.expire_all()
    with read_transaction(session):
        state = composer_state(session, conversation_id)
    return render_template(
        "chat/_composer.html",
        conversation_id=conversation_id,
        state=state,
        draft=draft,
        swap_oob=True,
    )
