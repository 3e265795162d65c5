"""users choose a colour theme (system, light or dark)

Revision ID: 18a3c6e9d2f1
Revises: 19a1c3e5f7b9
Create Date: 2026-12-01 13:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


revision = '18a3c6e9d2f1'
down_revision = '19a1c3e5f7b9'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('theme', sa.String(length=10), server_default='system', nullable=False))


def downgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('theme')
