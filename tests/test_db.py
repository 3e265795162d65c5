"""Transactions as the database sees them (app/db.py): what a read costs in round trips on
PostgreSQL, and that a write after it is still one transaction."""

from __future__ import annotations

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, insert, select, text

from app.db import Database, read_transaction

metadata = MetaData()
counted = Table("counted", metadata, Column("id", Integer, primary_key=True))


@pytest.fixture
def postgres(database_url):
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only: runs in CI's second pass (DATABASE_URL)")
    database = Database(database_url, pool_size=1, max_overflow=0)
    metadata.create_all(database.engine)
    yield database
    database.engine.dispose()


def _status(session) -> str:
    """The server's transaction state as psycopg last heard it: IDLE outside one."""
    return session.connection().connection.dbapi_connection.info.transaction_status.name


def test_a_read_on_postgresql_opens_no_transaction(postgres):
    # READ COMMITTED gives every statement its own snapshot: BEGIN and COMMIT around
    # reads would be two round trips for nothing.
    with postgres.session() as session, read_transaction(session):
        assert session.scalar(text("SELECT 1")) == 1
        assert _status(session) == "IDLE"


def test_a_write_after_a_read_on_the_same_connection_is_one_transaction(postgres):
    with postgres.session() as session:
        with read_transaction(session):
            session.execute(select(counted.c.id)).all()
        session.execute(insert(counted).values(id=1))
        assert _status(session) == "INTRANS"  # the pool gave the connection back transactional
        session.rollback()
        assert session.scalar(select(counted.c.id)) is None
