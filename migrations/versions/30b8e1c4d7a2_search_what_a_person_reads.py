"""search indexes what a person reads: rebuild the index of existing rows

A card's option values, thumbnails and an image's asset address were indexed before; now
only a card's title, reason, questions and chosen labels are (app/chat/search.py,
`searchable_text`). The index is written at write time, so existing rows are indexed
again here, a batch at a time.

Revision ID: 30b8e1c4d7a2
Revises: 18a3c6e9d2f1
Create Date: 2027-01-10 10:00:00.000000

"""
import json

from alembic import op
import sqlalchemy as sa

from app.chat import search_index
from app.chat.search import searchable_text


revision = '30b8e1c4d7a2'
down_revision = '18a3c6e9d2f1'
branch_labels = None
depends_on = None

BATCH = 500


def upgrade():
    reindex(op.get_bind())


def downgrade():
    pass  # the index rebuilt with today's rules reads the same rows: nothing to undo


def reindex(connection):
    """Every visible row indexed again with `searchable_text` as it is now."""
    sqlite = connection.dialect.name == "sqlite"
    table = search_index.TABLE
    column = "rowid" if sqlite else "message_id"
    connection.execute(sa.text(f"DELETE FROM {table}"))
    insert = sa.text(f"INSERT INTO {table} ({column}, body) VALUES (:id, :body)")
    last_id = 0
    while True:
        rows = connection.execute(
            sa.text(
                "SELECT id, kind, content, meta FROM messages WHERE id > :last"
                " ORDER BY id LIMIT :batch"
            ),
            {"last": last_id, "batch": BATCH},
        ).all()
        if not rows:
            break
        documents = []
        for row in rows:
            meta = row.meta if isinstance(row.meta, dict) else json.loads(row.meta or "{}")
            body = "" if meta.get("hidden") else searchable_text(row.kind, row.content, meta)
            if body:
                documents.append({"id": row.id, "body": body})
        if documents:
            connection.execute(insert, documents)
        last_id = rows[-1].id
