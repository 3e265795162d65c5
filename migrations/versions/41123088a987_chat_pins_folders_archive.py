"""chat pins, folders and archive

Revision ID: 41123088a987
Revises: 42848bf167d0
Create Date: 2026-12-03 19:41:02.140800

"""
from alembic import op
import sqlalchemy as sa


revision = '41123088a987'
down_revision = '42848bf167d0'
branch_labels = None
depends_on = None


# Plain ALTER TABLE, not batch_alter_table: on SQLite a batch copies the table and the copy
# loses AUTOINCREMENT (chat ids would then be reused after a delete).
def upgrade():
    op.add_column('conversations', sa.Column('pinned_at', sa.DateTime(), nullable=True))
    op.add_column('conversations', sa.Column('archived_at', sa.DateTime(), nullable=True))
    op.add_column('conversations', sa.Column('folder', sa.String(length=60), nullable=True))


def downgrade():
    op.drop_column('conversations', 'folder')
    op.drop_column('conversations', 'archived_at')
    op.drop_column('conversations', 'pinned_at')
