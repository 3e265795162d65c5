"""conversations remember where their title came from; public ids are never reused

Adds conversations.title_source ("default", "message", "model" or "person"): the fast
model names a chat after its first exchange unless the person named it. Titles that exist
already are kept as they are (taken as the person's).

On SQLite, the tables whose ids people and the model see are rebuilt with AUTOINCREMENT:
without it SQLite hands out the largest rowid again once its row is deleted, so a deleted
chat's URL would open the next chat. (PostgreSQL sequences never go back: nothing to do.)
The rebuild drops each table, so foreign keys must be off meanwhile (migrations/env.py
turns them off on SQLite), or the drop would cascade into the rows that reference it.

Revision ID: f127f3b6f14d
Revises: e3508c439509
Create Date: 2026-12-02 10:00:00

"""

from alembic import op
import sqlalchemy as sa


revision = "f127f3b6f14d"
down_revision = "e3508c439509"
branch_labels = None
depends_on = None

PUBLIC_ID_TABLES = (
    "conversations",
    "messages",
    "runs",
    "offers",
    "personas",
    "outputs",
    "visual_assets",
    "characters",
    "campaigns",
    "attachments",
)


def _rebuild_sqlite_tables(autoincrement: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    if bind.exec_driver_sql("PRAGMA foreign_keys").scalar():
        raise RuntimeError(
            "foreign keys are on: rebuilding a table would delete the rows referencing it "
            "(migrations/env.py turns them off on SQLite)"
        )
    for table in PUBLIC_ID_TABLES:
        with op.batch_alter_table(
            table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
        ):
            pass
    problems = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if problems:
        raise RuntimeError(f"foreign keys broken by the rebuild: {problems[:5]}")


def upgrade():
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "title_source", sa.String(length=16), server_default="default", nullable=False
            )
        )
    op.execute("UPDATE conversations SET title_source = 'person' WHERE title <> 'New chat'")
    _rebuild_sqlite_tables(autoincrement=True)


def downgrade():
    _rebuild_sqlite_tables(autoincrement=False)
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("title_source")
