"""queue and unread: queued_messages, conversations.unread

Messages a person queues while a run answers wait in queued_messages until the run ends
(app/chat/queue.py). conversations.unread marks a chat whose reply ended while the person
looked elsewhere; every existing chat starts read.

Revision ID: 5d8e1f0a9c42
Revises: 1e69893fc493
Create Date: 2026-12-05 09:00:00.000000

"""

import sqlalchemy as sa
from alembic import op

revision = "5d8e1f0a9c42"
down_revision = "1e69893fc493"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "queued_messages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_queued_messages_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queued_messages")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("queued_messages") as batch_op:
        batch_op.create_index(
            batch_op.f("ix_queued_messages_conversation_id"), ["conversation_id"], unique=False
        )
    # A plain ADD COLUMN (SQLite takes it with its default): the table keeps its
    # AUTOINCREMENT, which a batch copy would drop.
    op.add_column(
        "conversations",
        sa.Column("unread", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade():
    op.drop_column("conversations", "unread")  # SQLite 3.35+ drops a plain column
    with op.batch_alter_table("queued_messages") as batch_op:
        batch_op.drop_index(batch_op.f("ix_queued_messages_conversation_id"))
    op.drop_table("queued_messages")
