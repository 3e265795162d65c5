"""sessions that end, and token scopes and expiry

users.session_generation: every session cookie names the generation it was issued under;
bumping it ends them all. On SQLite the users table is rebuilt with AUTOINCREMENT: once
people can be deleted, a new account must never get a deleted one's id (a stale cookie
naming that id would otherwise be taken for the newcomer's). PostgreSQL sequences never go
back. The rebuild drops the table, so foreign keys are off meanwhile (migrations/env.py).

Revision ID: 19a1c3e5f7b9
Revises: 17c4a9e2b1d0
Create Date: 2026-12-01 13:00:00

"""
from alembic import op
import sqlalchemy as sa

revision = '19a1c3e5f7b9'
down_revision = '17c4a9e2b1d0'
branch_labels = None
depends_on = None


def _users_batch(autoincrement: bool):
    if op.get_bind().dialect.name != "sqlite":
        return op.batch_alter_table('users', schema=None)
    if op.get_bind().exec_driver_sql("PRAGMA foreign_keys").scalar():
        raise RuntimeError("foreign keys are on: rebuilding users would delete every row referencing it")
    return op.batch_alter_table(
        'users', schema=None, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
    )


def _check_foreign_keys():
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        problems = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if problems:
            raise RuntimeError(f"foreign keys broken by the rebuild: {problems[:5]}")


def upgrade():
    with _users_batch(autoincrement=True) as batch_op:
        batch_op.add_column(sa.Column('session_generation', sa.Integer(), server_default=sa.text('0'), nullable=False))
    _check_foreign_keys()

    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scopes', sa.String(length=40), server_default='read chat', nullable=False))
        batch_op.add_column(sa.Column('expires_at', sa.DateTime(), nullable=True))

    # Tokens made before scopes could do anything their owner could: an admin's keep admin.
    op.execute(
        "UPDATE api_tokens SET scopes = 'read chat admin' "
        "WHERE user_id IN (SELECT id FROM users WHERE is_admin)"
    )


def downgrade():
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_column('expires_at')
        batch_op.drop_column('scopes')

    with _users_batch(autoincrement=False) as batch_op:
        batch_op.drop_column('session_generation')
    _check_foreign_keys()
