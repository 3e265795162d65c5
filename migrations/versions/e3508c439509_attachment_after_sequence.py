"""attachments remember the conversation's latest sequence when they were uploaded

Revision ID: e3508c439509
Revises: 4c1628762581
Create Date: 2026-12-01 09:30:50.499533

"""
from alembic import op
import sqlalchemy as sa


revision = 'e3508c439509'
down_revision = '4c1628762581'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('attachments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('after_sequence', sa.Integer(), server_default='0', nullable=False))

    # Attachments already stored: the latest row written before them (by timestamp, the
    # best there is for rows that predate the column).
    op.execute(
        """
        UPDATE attachments SET after_sequence = COALESCE((
            SELECT MAX(messages.sequence) FROM messages
            WHERE messages.conversation_id = attachments.conversation_id
              AND messages.created_at <= attachments.created_at
        ), 0)
        WHERE conversation_id IS NOT NULL
        """
    )


def downgrade():
    with op.batch_alter_table('attachments', schema=None) as batch_op:
        batch_op.drop_column('after_sequence')
