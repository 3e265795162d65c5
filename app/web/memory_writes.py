"""Memory writes from a request, committed whole or rolled back and refused: the settings
page, the admin's view of someone's memory and the memory API never save half an edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from app.memory.store import (
    MemoryRefused,
    Operation,
    Outcome,
    Source,
    apply_operations,
    reconcile,
)
from app.web.identity import db_session, services


def _committed(write: Callable[[Session], Outcome]) -> Outcome:
    """Commit what `write` did, or roll it back and raise MemoryRefused again."""
    session = db_session()
    try:
        outcome = write(session)
    except MemoryRefused:
        session.rollback()
        raise
    session.commit()
    return outcome


def apply_committed(
    user_id: int, operations: list[Operation], *, source: Source, actor_id: int, **kwargs: Any
) -> Outcome:
    """Explicit edits (add, forget, correct, instructions)."""
    return _committed(
        lambda session: apply_operations(
            session, user_id, operations, source=source, actor_id=actor_id, **kwargs
        )
    )


def reconcile_committed(user_id: int, text: str, *, source: Source, actor_id: int) -> Outcome:
    """Facts the fast model picks out of a text."""
    model, fast_model = services().model, services().settings.fast_model
    return _committed(
        lambda session: reconcile(
            session,
            model,
            fast_model,
            user_id,
            text,
            source=source,
            actor_id=actor_id,
        )
    )
