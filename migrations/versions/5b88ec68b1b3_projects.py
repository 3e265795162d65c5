"""projects: shared workspaces with members and roles

Every person gets a personal project (named "Personal", its owner the person) and every
workspace row and chat moves into its maker's personal project: nothing is lost, and a
person with only their personal project sees exactly what they saw before.

The new project_id columns are added nullable, filled from the personal projects, then
made NOT NULL. On SQLite that last step rebuilds each table (batch mode), which would
drop AUTOINCREMENT: the rebuild keeps it (as f127f3b6f14d does), with foreign keys off
meanwhile (migrations/env.py turns them off on SQLite).

Revision ID: 5b88ec68b1b3
Revises: 41123088a987
Create Date: 2026-12-03 19:41:37.618642

"""

import sqlalchemy as sa
from alembic import op

revision = "5b88ec68b1b3"
down_revision = "41123088a987"
branch_labels = None
depends_on = None

# The tables whose rows belong to a project; each already has user_id (its maker).
PROJECT_TABLES = (
    "offers",
    "personas",
    "visual_assets",
    "outputs",
    "characters",
    "campaigns",
    "conversations",
)


def upgrade():

    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=80), nullable=False),
        sa.Column("personal_user_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["personal_user_id"],
            ["users.id"],
            name=op.f("fk_projects_personal_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("personal_user_id", name=op.f("uq_projects_personal_user_id")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "project_invitations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("token_digest", sa.String(length=64), nullable=False),
        sa.Column("invited_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("accepted_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["invited_by_id"],
            ["users.id"],
            name=op.f("fk_project_invitations_invited_by_id_users"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_project_invitations_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_project_invitations")),
        sa.UniqueConstraint("token_digest", name=op.f("uq_project_invitations_token_digest")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("project_invitations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_project_invitations_email"), ["email"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_project_invitations_project_id"), ["project_id"], unique=False
        )

    op.create_table(
        "project_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_project_members_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_project_members_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_project_members")),
        sa.UniqueConstraint("project_id", "user_id", name=op.f("uq_project_members_project_id")),
    )
    with op.batch_alter_table("project_members", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_project_members_user_id"), ["user_id"], unique=False)

    op.execute(
        "INSERT INTO projects (name, personal_user_id, created_at)"
        " SELECT 'Personal', id, created_at FROM users ORDER BY id"
    )
    op.execute(
        "INSERT INTO project_members (project_id, user_id, role, created_at)"
        " SELECT id, personal_user_id, 'owner', created_at FROM projects"
        " WHERE personal_user_id IS NOT NULL ORDER BY id"
    )
    for table in PROJECT_TABLES:
        op.add_column(table, sa.Column("project_id", sa.Integer(), nullable=True))
        op.execute(
            f"UPDATE {table} SET project_id = (SELECT projects.id FROM projects"
            f" WHERE projects.personal_user_id = {table}.user_id)"
        )
    op.add_column(
        "conversations",
        sa.Column("project_chosen", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite and bind.exec_driver_sql("PRAGMA foreign_keys").scalar():
        raise RuntimeError("foreign keys are on: rebuilding a table would delete rows")
    for table in PROJECT_TABLES:
        with op.batch_alter_table(
            table,
            recreate="always" if sqlite else "auto",
            table_kwargs={"sqlite_autoincrement": True},
        ) as batch_op:
            batch_op.alter_column("project_id", existing_type=sa.Integer(), nullable=False)
            batch_op.create_index(
                batch_op.f(f"ix_{table}_project_id"), ["project_id"], unique=False
            )
            batch_op.create_foreign_key(
                batch_op.f(f"fk_{table}_project_id_projects"),
                "projects",
                ["project_id"],
                ["id"],
                ondelete="CASCADE",
            )
    if sqlite:
        problems = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise RuntimeError(f"foreign keys broken by the rebuild: {problems[:5]}")


def downgrade():
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    for table in PROJECT_TABLES:
        with op.batch_alter_table(
            table,
            recreate="always" if sqlite else "auto",
            table_kwargs={"sqlite_autoincrement": True},
        ) as batch_op:
            batch_op.drop_constraint(
                batch_op.f(f"fk_{table}_project_id_projects"), type_="foreignkey"
            )
            batch_op.drop_index(batch_op.f(f"ix_{table}_project_id"))
            batch_op.drop_column("project_id")
            if table == "conversations":
                batch_op.drop_column("project_chosen")
    op.drop_table("project_members")
    op.drop_table("project_invitations")
    op.drop_table("projects")
