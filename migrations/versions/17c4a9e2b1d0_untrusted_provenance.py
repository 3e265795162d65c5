"""provenance: what untrusted content outputs, characters, assets, campaigns and memory
facts were made from

Revision ID: 17c4a9e2b1d0
Revises: 21a0c5e9f3b1
Create Date: 2026-12-01 13:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


revision = '17c4a9e2b1d0'
down_revision = '21a0c5e9f3b1'
branch_labels = None
depends_on = None

TABLES = ('outputs', 'characters', 'visual_assets', 'campaigns')

# Plain ALTER TABLE (SQLite adds and drops columns itself): a batch copy of a table on
# SQLite would drop it, and whatever cascades from it.


def upgrade():
    for table in TABLES:
        op.add_column(table, sa.Column('untrusted_sources', sa.JSON(), nullable=True))
    op.add_column('user_memories', sa.Column('untrusted_facts', sa.JSON(), nullable=True))


def downgrade():
    op.drop_column('user_memories', 'untrusted_facts')
    for table in reversed(TABLES):
        op.drop_column(table, 'untrusted_sources')
