"""models to choose from: offered_models, conversations.model

The models an admin lists for people to pick, and each chat's pick (a name; NULL, as every
chat so far, answers with the default). No existing row changes.

Revision ID: b4d0c2e7a913
Revises: 9d3f1c2b7a64
Create Date: 2026-12-05 09:00:00.000000

"""

import sqlalchemy as sa
from alembic import op

revision = "b4d0c2e7a913"
down_revision = "9d3f1c2b7a64"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "offered_models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("label", sa.String(length=80), nullable=False),
        sa.Column("credits", sa.Integer(), nullable=True),
        sa.Column("window_tokens", sa.Integer(), nullable=True),
        sa.Column("thinking_budget", sa.Integer(), nullable=True),
        sa.Column("is_default", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_offered_models")),
        sa.UniqueConstraint("name", name=op.f("uq_offered_models_name")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("conversations") as batch_op:
        batch_op.add_column(sa.Column("model", sa.String(length=100), nullable=True))


def downgrade():
    with op.batch_alter_table("conversations") as batch_op:
        batch_op.drop_column("model")
    op.drop_table("offered_models")
