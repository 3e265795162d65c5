"""search at scale: SQLite's full-text index keeps its prefixes

FTS5 is told to keep a doclist for each prefix of 2 to 8 letters (`prefix='2 3 4 5 6 7
8'`), so "launc" reads one list instead of merging every word that begins so. FTS5 takes
the option only when its table is made: the table is made again with it and its rows
copied over (the text is the same: nothing is indexed anew). Downgrade makes it again
without. PostgreSQL's tsvector under GIN answers prefixes already: nothing to do there.

Revision ID: 9e4b7c2a5d18
Revises: 5c1d9e7a3b20
Create Date: 2026-12-05 12:45:00.000000

"""

from alembic import op

revision = "9e4b7c2a5d18"
down_revision = "5c1d9e7a3b20"
branch_labels = None
depends_on = None

TABLE = "message_search"
KEPT = "search_rows_kept"
# The table as each side of this revision makes it (written out: later code may change).
WITH_PREFIXES = "fts5(body, tokenize='porter unicode61', prefix='2 3 4 5 6 7 8')"
WITHOUT_PREFIXES = "fts5(body, tokenize='porter unicode61')"


def upgrade():
    _remake(WITH_PREFIXES)


def downgrade():
    _remake(WITHOUT_PREFIXES)


def _remake(definition: str) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(f"CREATE TEMPORARY TABLE {KEPT} AS SELECT rowid AS id, body FROM {TABLE}")
    op.execute(f"DROP TABLE {TABLE}")
    op.execute(f"CREATE VIRTUAL TABLE {TABLE} USING {definition}")
    op.execute(f"INSERT INTO {TABLE} (rowid, body) SELECT id, body FROM {KEPT}")
    op.execute(f"DROP TABLE {KEPT}")
