"""a full-text index of the rows people can see (search across chats)

Revision ID: 21a0c5e9f3b1
Revises: b5d2e8f41c7a
Create Date: 2026-12-01 13:00:00.000000

"""
import json

from alembic import op
import sqlalchemy as sa

from app.chat import search_index
from app.chat.search import searchable_text


revision = '21a0c5e9f3b1'
down_revision = 'b5d2e8f41c7a'
branch_labels = None
depends_on = None

BATCH = 500


def upgrade():
    connection = op.get_bind()
    dialect = connection.dialect.name
    for statement in search_index.create_statements(dialect):
        op.execute(statement)
    # Existing rows become searchable too: the visible ones, a batch at a time.
    column = "rowid" if dialect == "sqlite" else "message_id"
    insert = sa.text(f"INSERT INTO {search_index.TABLE} ({column}, body) VALUES (:id, :body)")
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


def downgrade():
    for statement in search_index.drop_statements(op.get_bind().dialect.name):
        op.execute(statement)
