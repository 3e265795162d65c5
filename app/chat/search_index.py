"""The full-text index of rows a person can see, as DDL (no models imported here).

One table per database, the same name and the same columns to the queries that read it:
- SQLite: an FTS5 table (`rowid` = the message id, `body` = its searchable text).
- PostgreSQL: a table with the text and its `tsvector`, under a GIN index.

Rows are written by `app.chat.search.index_row`, in the transaction that inserts or
changes the message. A message deleted (with its conversation, or its person) leaves
the index in the same statement: a trigger on SQLite, a cascading key on PostgreSQL.
The table is outside the ORM's metadata; `is_index_table` tells schema comparisons so.
"""

from __future__ import annotations

from collections.abc import Iterable

TABLE = "message_search"
# The same stemming on both databases: "launching" finds "launch".
POSTGRES_CONFIG = "english"
# FTS5 keeps a doclist for every prefix of these lengths: a prefix query ("launc"*) then
# reads one list instead of merging every word that begins so (ten times faster at 100,000
# rows); a longer prefix is merged, and is rare enough that it costs little.
SQLITE_PREFIXES = "2 3 4 5 6 7 8"
SQLITE_TABLE_DDL = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5("
    f"body, tokenize='porter unicode61', prefix='{SQLITE_PREFIXES}')"
)

SQLITE_DDL = (
    SQLITE_TABLE_DDL,
    f"""CREATE TRIGGER IF NOT EXISTS {TABLE}_forget AFTER DELETE ON messages
        BEGIN DELETE FROM {TABLE} WHERE rowid = old.id; END""",
)
SQLITE_DROP = (f"DROP TRIGGER IF EXISTS {TABLE}_forget", f"DROP TABLE IF EXISTS {TABLE}")

POSTGRES_DDL = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        message_id BIGINT PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
        body TEXT NOT NULL,
        document TSVECTOR GENERATED ALWAYS AS (to_tsvector('{POSTGRES_CONFIG}', body)) STORED
    )""",
    f"CREATE INDEX IF NOT EXISTS ix_{TABLE}_document ON {TABLE} USING gin (document)",
)
POSTGRES_DROP = (f"DROP TABLE IF EXISTS {TABLE}",)


def create_statements(dialect: str) -> Iterable[str]:
    return SQLITE_DDL if dialect == "sqlite" else POSTGRES_DDL


def drop_statements(dialect: str) -> Iterable[str]:
    return SQLITE_DROP if dialect == "sqlite" else POSTGRES_DROP


def is_index_table(name: str) -> bool:
    """The index and FTS5's own shadow tables (message_search_data, ..._idx, ...)."""
    return name == TABLE or name.startswith(f"{TABLE}_")


def include_in_comparison(
    _object: object, name: str | None, type_: str, _reflected: bool, _compare_to: object
) -> bool:
    """Alembic's `include_object`: the index is created by hand, not from the models."""
    return not (type_ == "table" and name and is_index_table(name))
