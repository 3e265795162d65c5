"""indexes a turn needs at scale: runs by person and status, usage events by chat

Every turn counts the person's queued and running runs. Indexed by person alone, the count
read every run the person ever had (its status is in the row); indexed by person and
status, it reads the active entries only. The composite index serves lookups by person
alone too, so it replaces that one.

A chat's context gauge reads its latest usage event, and deleting a chat clears the chat
from its events: without an index by chat, both read every usage event of every person.

Revision ID: 3f8a2d6c1b47
Revises: 9e4b7c2a5d18
Create Date: 2026-12-05 23:15:00.000000

"""

from alembic import op

revision = "3f8a2d6c1b47"
down_revision = "9e4b7c2a5d18"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_runs_user_id_status", "runs", ["user_id", "status"])
    op.drop_index("ix_runs_user_id", table_name="runs")
    op.create_index("ix_usage_events_conversation_id", "usage_events", ["conversation_id"])


def downgrade():
    op.drop_index("ix_usage_events_conversation_id", table_name="usage_events")
    op.create_index("ix_runs_user_id", "runs", ["user_id"])
    op.drop_index("ix_runs_user_id_status", table_name="runs")
