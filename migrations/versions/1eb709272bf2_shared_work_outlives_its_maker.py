"""shared work outlives its maker: a workspace row's maker is SET NULL when they go

Offers, personas, outputs, assets, characters and campaigns belong to a project;
`user_id` on them is who made them. Deleting a person used to cascade through
`user_id` and take what they made in shared projects away from the other members; now
the row stays with its project, its maker NULL (a person's personal project still goes
with them, and its rows with it, through `project_id`).

Changing a foreign key's ON DELETE rule on SQLite rebuilds the table (batch mode): the
rebuild keeps AUTOINCREMENT (as 5b88ec68b1b3 does), with foreign keys off meanwhile
(migrations/env.py turns them off on SQLite). Every row is kept.

Revision ID: 1eb709272bf2
Revises: 5b88ec68b1b3
Create Date: 2026-12-03 23:05:00

"""

import sqlalchemy as sa
from alembic import op

revision = "1eb709272bf2"
down_revision = "5b88ec68b1b3"
branch_labels = None
depends_on = None

# The project workspace's tables; each has user_id, its maker.
WORKSPACE_TABLES = ("offers", "personas", "visual_assets", "outputs", "characters", "campaigns")


def _maker_rule(ondelete: str, nullable: bool) -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite and bind.exec_driver_sql("PRAGMA foreign_keys").scalar():
        raise RuntimeError("foreign keys are on: rebuilding a table would delete rows")
    for table in WORKSPACE_TABLES:
        with op.batch_alter_table(
            table,
            recreate="always" if sqlite else "auto",
            table_kwargs={"sqlite_autoincrement": True},
        ) as batch_op:
            batch_op.drop_constraint(batch_op.f(f"fk_{table}_user_id_users"), type_="foreignkey")
            batch_op.alter_column("user_id", existing_type=sa.Integer(), nullable=nullable)
            batch_op.create_foreign_key(
                batch_op.f(f"fk_{table}_user_id_users"),
                "users",
                ["user_id"],
                ["id"],
                ondelete=ondelete,
            )
    if sqlite:
        problems = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise RuntimeError(f"foreign keys broken by the rebuild: {problems[:5]}")


def upgrade():
    _maker_rule("SET NULL", nullable=True)


def downgrade():
    # A row whose maker is gone cannot name one again: it goes, as it would have before.
    for table in WORKSPACE_TABLES:
        op.execute(f"DELETE FROM {table} WHERE user_id IS NULL")
    _maker_rule("CASCADE", nullable=False)
