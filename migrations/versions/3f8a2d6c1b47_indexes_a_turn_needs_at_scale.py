"""indexes a turn needs at scale: runs by person and status, usage events by chat,
schedules by person, and every foreign key

Every turn counts the person's queued and running runs. Indexed by person alone, the count
read every run the person ever had (its status is in the row); indexed by person and
status, it reads the active entries only. The composite index serves lookups by person
alone too, so it replaces that one.

A chat's context gauge reads its latest usage event, and deleting a chat clears the chat
from its events: without an index by chat, both read every usage event of every person.
A person's schedules (settings, export, deletion) read every schedule without one by person.
And every other foreign key without an index (a memory change's actor, an invitation's
inviter, a share's maker, a character's portrait): deleting the row it names read every
row of its table to find the ones naming it.

Revision ID: 3f8a2d6c1b47
Revises: 9e4b7c2a5d18
Create Date: 2026-12-05 23:15:00.000000

"""

from alembic import op

revision = "3f8a2d6c1b47"
down_revision = "9e4b7c2a5d18"
branch_labels = None
depends_on = None

FOREIGN_KEYS = (
    ("memory_changes", "actor_id"),
    ("project_invitations", "invited_by_id"),
    ("chat_shares", "created_by"),
    ("characters", "portrait_asset_id"),
)


def upgrade():
    op.create_index("ix_runs_user_id_status", "runs", ["user_id", "status"])
    op.drop_index("ix_runs_user_id", table_name="runs")
    op.create_index("ix_usage_events_conversation_id", "usage_events", ["conversation_id"])
    op.create_index("ix_chat_schedules_user_id", "chat_schedules", ["user_id"])
    for table, column in FOREIGN_KEYS:
        op.create_index(f"ix_{table}_{column}", table, [column])


def downgrade():
    for table, column in FOREIGN_KEYS:
        op.drop_index(f"ix_{table}_{column}", table_name=table)
    op.drop_index("ix_chat_schedules_user_id", table_name="chat_schedules")
    op.drop_index("ix_usage_events_conversation_id", table_name="usage_events")
    op.create_index("ix_runs_user_id", "runs", ["user_id"])
    op.drop_index("ix_runs_user_id_status", table_name="runs")
