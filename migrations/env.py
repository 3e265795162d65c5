"""Alembic environment: our own engine and the models' metadata (no Flask-SQLAlchemy)."""

from logging.config import fileConfig

from alembic import context
from flask import current_app

from app.chat.search_index import include_in_comparison
from app.models import Base

config = context.config
if config.config_file_name is not None and not context.config.attributes.get("quiet"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

migrate_config = current_app.extensions["migrate"]
database = migrate_config.db


def run_migrations_offline() -> None:
    context.configure(
        url=database.url,
        target_metadata=Base.metadata,
        literal_binds=True,
        include_object=include_in_comparison,
        **migrate_config.configure_args,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    with database.engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode rebuilds a SQLite table by dropping it; with foreign keys on, the
            # drop would cascade into every row referencing it. The pragma only takes
            # effect outside a transaction: set on the driver's connection, before any.
            _sqlite_foreign_keys(connection, False)
        try:
            context.configure(
                connection=connection,
                target_metadata=Base.metadata,
                include_object=include_in_comparison,
                **migrate_config.configure_args,
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            if sqlite:
                connection.rollback()
                _sqlite_foreign_keys(connection, True)


def _sqlite_foreign_keys(connection, on: bool) -> None:
    connection.connection.driver_connection.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
