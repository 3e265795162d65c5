"""JSON columns keep their key order on PostgreSQL (json, not jsonb)

Revision ID: a3c5e7f9b1d2
Revises: d66a91a5aa78
Create Date: 2026-11-30 06:20:00

"""
from alembic import op

revision = "a3c5e7f9b1d2"
down_revision = "d66a91a5aa78"
branch_labels = None
depends_on = None

COLUMNS = [
    ("offers", "brand_colors"),
    ("visual_assets", "meta"),
    ("outputs", "content"),
    ("campaigns", "briefing"),
    ("messages", "meta"),
    ("user_memories", "facts"),
    ("users", "starters"),
]


def _retype(kind: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite stores JSON as text already
    for table, column in COLUMNS:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} DROP DEFAULT")
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {kind} USING {column}::{kind}")
    op.execute(f"ALTER TABLE users ALTER COLUMN starters SET DEFAULT '[]'::{kind}")


def upgrade():
    _retype("json")


def downgrade():
    _retype("jsonb")
