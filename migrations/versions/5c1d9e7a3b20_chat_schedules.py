"""chat schedules: messages sent into a chat on a cron schedule

A new table; no existing row changes.

Revision ID: 5c1d9e7a3b20
Revises: a4f0c2d9e1b7
Create Date: 2026-12-05 09:00:00.000000

"""

import sqlalchemy as sa
from alembic import op

revision = "5c1d9e7a3b20"
down_revision = "a4f0c2d9e1b7"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "chat_schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("cron", sa.String(length=120), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("paused", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("next_run_at", sa.DateTime(), nullable=False),
        sa.Column("last_run_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_chat_schedules_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_chat_schedules_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_schedules")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("chat_schedules", schema=None) as batch_op:
        batch_op.create_index("ix_chat_schedules_due", ["paused", "next_run_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_chat_schedules_conversation_id"), ["conversation_id"], unique=False
        )


def downgrade():
    with op.batch_alter_table("chat_schedules", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chat_schedules_conversation_id"))
        batch_op.drop_index("ix_chat_schedules_due")
    op.drop_table("chat_schedules")
