"""message rows form a tree: each row knows the row it follows, and the conversation the
branch it shows

Revision ID: b5d2e8f41c7a
Revises: f127f3b6f14d
Create Date: 2026-12-08 10:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


revision = 'b5d2e8f41c7a'
down_revision = 'f127f3b6f14d'
branch_labels = None
depends_on = None


# Plain ALTER TABLE (SQLite 3.35+ drops columns itself): a batch copy of `conversations`
# on SQLite would drop the table, and its messages and runs with it by cascade.


def upgrade():
    op.add_column('messages', sa.Column('parent_sequence', sa.Integer(), nullable=True))
    op.add_column('conversations', sa.Column('branch_leaf_sequence', sa.Integer(), nullable=True))
    op.add_column(
        'conversations', sa.Column('branch_chosen_at_sequence', sa.Integer(), nullable=True)
    )

    # Existing conversations read as one straight branch: each row follows the one before.
    op.execute(
        """
        UPDATE messages SET parent_sequence = (
            SELECT MAX(earlier.sequence) FROM messages AS earlier
            WHERE earlier.conversation_id = messages.conversation_id
              AND earlier.sequence < messages.sequence
        )
        """
    )


def downgrade():
    op.drop_column('conversations', 'branch_chosen_at_sequence')
    op.drop_column('conversations', 'branch_leaf_sequence')
    op.drop_column('messages', 'parent_sequence')
