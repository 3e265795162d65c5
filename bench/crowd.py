"""A crowded workspace for the turn-cost benchmark (bench/turn_cost.py): the benchmark's
person is given a long past, many chats each with a finished run and its usage event, so a
turn that reads anything by person, by status or across every chat costs more there than in
an empty database. The rows are written straight into the served database (SQLite, while
the server is idle), a few thousand a transaction, shaped as the app stores them.
"""

from __future__ import annotations

import time

from sqlalchemy import create_engine, insert, select

from app.accounts.project_models import Project
from app.billing.models import UsageEvent
from app.db import utcnow
from app.models import Conversation, Run, User

CHATS = 100_000
QUICK_CHATS = 5_000
PER_TRANSACTION = 5_000
# Well above any id the benchmark's own turns make, so neither collides with the other.
FIRST_ID = 10_000_000


def fill(database_url: str, chats: int) -> float:
    """`chats` finished chats of the database's first person; the seconds it took."""
    began = time.perf_counter()
    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            user_id = connection.scalar(select(User.id).order_by(User.id).limit(1))
            project_id = connection.scalar(
                select(Project.id).where(Project.personal_user_id == user_id)
            )
        for start in range(0, chats, PER_TRANSACTION):
            ids = range(FIRST_ID + start, FIRST_ID + min(chats, start + PER_TRANSACTION))
            with engine.begin() as connection:
                _write(connection, ids, user_id, project_id)
    finally:
        engine.dispose()
    return time.perf_counter() - began


def _write(connection, ids: range, user_id: int, project_id: int) -> None:
    now = utcnow()
    connection.execute(
        insert(Conversation),
        [
            {
                "id": chat_id,
                "user_id": user_id,
                "project_id": project_id,
                "title": f"An earlier chat {chat_id}",
                "title_source": "message",
                "created_at": now,
                "updated_at": now,
            }
            for chat_id in ids
        ],
    )
    connection.execute(
        insert(Run),
        [
            {
                "id": chat_id,
                "conversation_id": chat_id,
                "user_id": user_id,
                "status": "completed",
                "iterations": 1,
                "created_at": now,
                "started_at": now,
                "finished_at": now,
            }
            for chat_id in ids
        ],
    )
    connection.execute(
        insert(UsageEvent),
        [
            {
                "idempotency_key": f"{chat_id}:chat:0",
                "user_id": user_id,
                "conversation_id": chat_id,
                "project_id": project_id,
                "run_id": chat_id,
                "model": "claude-bench",
                "credits": 1,
                "month": now.strftime("%Y-%m"),
            }
            for chat_id in ids
        ],
    )
