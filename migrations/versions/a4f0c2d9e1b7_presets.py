"""presets: a person's (or the admin's, for everyone) ways to start a chat

A new `presets` table (user_id NULL: the admin's), and conversations.preset_id, the preset
a chat was started from (NULL for every chat so far; SET NULL when the preset is deleted).

On SQLite a reference can be added only by rebuilding the table (batch mode), which would
drop AUTOINCREMENT: the rebuild keeps it (as 5b88ec68b1b3 does), with foreign keys off
meanwhile (migrations/env.py), and every row and id as they were.

Revision ID: a4f0c2d9e1b7
Revises: 5d8e1f0a9c42
Create Date: 2026-12-05 09:00:00.000000

"""

import sqlalchemy as sa
from alembic import op

revision = "a4f0c2d9e1b7"
down_revision = "5d8e1f0a9c42"
branch_labels = None
depends_on = None

FK_NAME = "fk_conversations_preset_id_presets"
INDEX_NAME = "ix_conversations_preset_id"


def upgrade():
    op.create_table(
        "presets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=60), nullable=False),
        sa.Column("instructions", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=120), nullable=False),
        sa.Column("tool_groups", sa.JSON(), nullable=False),
        sa.Column("starters", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_presets_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_presets")),
        sa.UniqueConstraint("user_id", "name", name=op.f("uq_presets_user_id")),
        sqlite_autoincrement=True,
    )
    op.create_index(op.f("ix_presets_user_id"), "presets", ["user_id"], unique=False)
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "conversations",
        recreate="always" if sqlite else "auto",
        table_kwargs={"sqlite_autoincrement": True},
    ) as batch_op:
        batch_op.add_column(sa.Column("preset_id", sa.Integer(), nullable=True))
        batch_op.create_index(INDEX_NAME, ["preset_id"], unique=False)
        batch_op.create_foreign_key(FK_NAME, "presets", ["preset_id"], ["id"], ondelete="SET NULL")


def downgrade():
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "conversations",
        recreate="always" if sqlite else "auto",
        table_kwargs={"sqlite_autoincrement": True},
    ) as batch_op:
        batch_op.drop_constraint(FK_NAME, type_="foreignkey")
        batch_op.drop_index(INDEX_NAME)
        batch_op.drop_column("preset_id")
    op.drop_index(op.f("ix_presets_user_id"), table_name="presets")
    op.drop_table("presets")
