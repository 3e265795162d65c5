"""Alembic environment: our own engine and the models' metadata (no Flask-SQLAlchemy)."""

from logging.config import fileConfig

from alembic import context
from flask import current_app

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
        **migrate_config.configure_args,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    with database.engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            **migrate_config.configure_args,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
