"""Engine, sessions and the declarative base. Plain SQLAlchemy: no Flask here."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from sqlalchemy import JSON, DateTime, MetaData, create_engine, event
from sqlalchemy.engine import CursorResult, Engine, Result
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import (
    DeclarativeBase,
    Session,
    configure_mappers,
    make_transient_to_detached,
    sessionmaker,
)

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Plain JSON, also on PostgreSQL: these are documents shown to people (a quiz, a card, a
# row's blocks) whose key order matters; JSONB would reorder their keys.
JsonType = JSON()

# Table options for ids that people and the model see (URLs, tool inputs): never handed
# out again after a delete. SQLite reuses the largest rowid unless the table is
# AUTOINCREMENT; PostgreSQL sequences never go back.
NEVER_REUSED_IDS = {"sqlite_autoincrement": True}

LOCK_WAIT_SECONDS = 30.0
# Execution option naming a transaction that only reads (see `read_transaction`).
READ_ONLY = "loopdesk_read_only"


def utcnow() -> datetime:
    """Naive UTC: SQLite drops tzinfo, so every timestamp is stored naive and read as UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JsonType, list[Any]: JsonType, datetime: DateTime()}


M = TypeVar("M", bound=Base)


def as_loaded(session: Session, model: type[M], values: dict[str, Any]) -> M:
    """The object a query would have loaded from `values` (every column of a row read with
    a Core statement), in `session`; the one already there if it holds that row. Made the
    way SQLAlchemy's loader makes objects: a prebuilt Core read and this cost far less
    than an ORM query. Call it inside the transaction that read the row (adding to a
    session outside one begins one)."""
    mapper = model.__mapper__
    if not mapper.configured:  # a query would have configured it: the first one may be this
        configure_mappers()
    key = mapper.identity_key_from_primary_key(
        tuple(values[str(column.key)] for column in mapper.primary_key)
    )
    loaded = session.identity_map.get(key)
    if loaded is not None:
        return loaded
    obj = mapper.class_manager.new_instance()
    obj.__dict__.update(values)
    make_transient_to_detached(obj)
    session.add(obj)
    return obj


def _configure_sqlite(engine: Engine) -> None:
    # pysqlite's own transaction handling would begin lazily and deferred; a deferred
    # transaction that later writes can fail with SQLITE_BUSY without waiting. Taking the
    # write lock up front (BEGIN IMMEDIATE) makes writers queue on the busy timeout instead.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # Waiting for the write lock happens in Python (see _on_begin), never inside
        # SQLite's C busy handler, which would stall every greenlet of a gevent worker.
        cursor.execute("PRAGMA busy_timeout=0")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection):
        if connection.get_execution_options().get(READ_ONLY):
            # WAL readers take no lock and are never refused.
            connection.exec_driver_sql("BEGIN")
            return
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        pause = 0.0005
        while True:
            try:
                connection.exec_driver_sql("BEGIN IMMEDIATE")
                return
            except OperationalError as error:
                if "locked" not in str(error.orig) or time.monotonic() > deadline:
                    raise
            # time.sleep yields to other threads, and to other greenlets under gevent.
            time.sleep(pause)
            pause = min(pause * 2, 0.004)


def make_engine(url: str, **kwargs: Any) -> Engine:
    if url.startswith("sqlite"):
        kwargs.setdefault("connect_args", {"check_same_thread": False, "timeout": 0})
        if url in ("sqlite://", "sqlite:///:memory:"):
            kwargs.pop("pool_size", None)
            kwargs.pop("max_overflow", None)
        engine = create_engine(url, **kwargs)
        _configure_sqlite(engine)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


# PostgreSQL reads in READ COMMITTED, where every statement takes its own snapshot: a
# transaction around reads adds nothing but its BEGIN and COMMIT, two round trips of the
# few a turn's start or a request's sign-in makes. So its reads run in autocommit (psycopg
# sets it on the connection without a round trip; the pool resets it on return).
_READ_OPTIONS: dict[str, dict[str, Any]] = {
    "sqlite": {READ_ONLY: True},
    "postgresql": {READ_ONLY: True, "isolation_level": "AUTOCOMMIT"},
}


def _dialect_name(session: Session) -> str:
    bind = session.get_bind()
    return bind.dialect.name


@contextmanager
def read_transaction(session: Session) -> Iterator[Session]:
    """A transaction that only reads, ended (committed) on leaving the block; objects
    loaded in it stay usable. On SQLite it begins DEFERRED, so it neither takes nor waits
    for the write lock: a request can authenticate, or a socket check ownership, while a
    run is writing, and nothing holds the lock across the waits that follow (reading the
    body, a rate-limit check, a socket handshake). On PostgreSQL it is no transaction at
    all (`_READ_OPTIONS`). Inside a transaction already open it just joins it. Writing
    inside it could fail without waiting on SQLite, and would not be one transaction on
    PostgreSQL; don't."""
    if session.in_transaction():
        yield session
        return
    session.connection(
        execution_options=_READ_OPTIONS.get(_dialect_name(session), _READ_OPTIONS["sqlite"])
    )
    try:
        yield session
    except BaseException:
        session.rollback()
        raise
    session.commit()


class Database:
    """An engine and its session factory; one per app, shared with runs and workers."""

    def __init__(self, url: str, **engine_kwargs: Any) -> None:
        self.url = url
        self.engine = make_engine(url, **engine_kwargs)
        self.session_factory = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    def session(self) -> Session:
        return self.session_factory()

    def dispose(self) -> None:
        self.engine.dispose()


def rows_changed(result: Result[Any]) -> int:
    """How many rows an UPDATE or DELETE changed (its cursor's count)."""
    return int(cast(CursorResult[Any], result).rowcount)
