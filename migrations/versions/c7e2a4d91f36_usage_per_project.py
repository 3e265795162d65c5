"""usage per project: usage_events.project_id

Each usage event names the project its run's chat worked in, so a project's credits stay
readable after the chat is deleted. Events already written take their chat's project;
an event whose chat is gone keeps no project (it still counts for its person).

On SQLite a reference can be added only by copying the table (batch mode): usage_events
never had AUTOINCREMENT (its ids may be reused, as before), so the copy keeps every row,
id and index as they were. Foreign keys are off meanwhile (migrations/env.py).

Revision ID: c7e2a4d91f36
Revises: 1eb709272bf2
Create Date: 2026-12-03 23:10:00.000000

"""

import sqlalchemy as sa
from alembic import op

revision = "c7e2a4d91f36"
down_revision = "1eb709272bf2"
branch_labels = None
depends_on = None

FK_NAME = "fk_usage_events_project_id_projects"
INDEX_NAME = "ix_usage_events_project_month"


def upgrade():
    with op.batch_alter_table("usage_events") as batch_op:
        batch_op.add_column(sa.Column("project_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            FK_NAME, "projects", ["project_id"], ["id"], ondelete="SET NULL"
        )
        batch_op.create_index(INDEX_NAME, ["project_id", "month"], unique=False)
    op.execute(
        "UPDATE usage_events SET project_id = (SELECT conversations.project_id"
        " FROM conversations WHERE conversations.id = usage_events.conversation_id)"
        " WHERE conversation_id IS NOT NULL"
    )


def downgrade():
    with op.batch_alter_table("usage_events") as batch_op:
        batch_op.drop_index(INDEX_NAME)
        batch_op.drop_constraint(FK_NAME, type_="foreignkey")
        batch_op.drop_column("project_id")
