"""usage outlives its person: usage_events.user_id is SET NULL when they go

A project's credits are the team's record: deleting a person used to cascade through
usage_events.user_id and take their runs out of every project's totals. Now the event
stays, its person NULL (it names no one; its chat, project, model and credits are kept).

On SQLite changing a foreign key's rule copies the table (batch mode); usage_events never
had AUTOINCREMENT, so the copy keeps every row, id and index as they were. Foreign keys
are off meanwhile (migrations/env.py).

Revision ID: 9d3f1c2b7a64
Revises: c7e2a4d91f36
Create Date: 2026-12-05 09:00:00

"""

import sqlalchemy as sa
from alembic import op

revision = "9d3f1c2b7a64"
down_revision = "c7e2a4d91f36"
branch_labels = None
depends_on = None

FK_NAME = "fk_usage_events_user_id_users"


def _person_rule(ondelete: str, nullable: bool) -> None:
    with op.batch_alter_table("usage_events") as batch_op:
        batch_op.drop_constraint(FK_NAME, type_="foreignkey")
        batch_op.alter_column("user_id", existing_type=sa.Integer(), nullable=nullable)
        batch_op.create_foreign_key(FK_NAME, "users", ["user_id"], ["id"], ondelete=ondelete)


def upgrade():
    _person_rule("SET NULL", nullable=True)


def downgrade():
    # An event whose person is gone cannot name one again: it goes, as it would have.
    op.execute("DELETE FROM usage_events WHERE user_id IS NULL")
    _person_rule("CASCADE", nullable=False)
