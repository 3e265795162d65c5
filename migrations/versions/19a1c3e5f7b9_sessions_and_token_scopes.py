"""sessions that end, and token scopes and expiry

Revision ID: 19a1c3e5f7b9
Revises: b5d2e8f41c7a
Create Date: 2026-12-01 13:00:00

"""
from alembic import op
import sqlalchemy as sa

revision = '19a1c3e5f7b9'
down_revision = 'b5d2e8f41c7a'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_generation', sa.Integer(), server_default=sa.text('0'), nullable=False))

    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scopes', sa.String(length=40), server_default='read chat', nullable=False))
        batch_op.add_column(sa.Column('expires_at', sa.DateTime(), nullable=True))

    # Tokens made before scopes could do anything their owner could: an admin's keep admin.
    op.execute(
        "UPDATE api_tokens SET scopes = 'read chat admin' "
        "WHERE user_id IN (SELECT id FROM users WHERE is_admin)"
    )


def downgrade():
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_column('expires_at')
        batch_op.drop_column('scopes')

    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('session_generation')
