"""The schema comes from Alembic: upgrade from empty works and matches the models."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import upgrade
from sqlalchemy import inspect

from app.models import Base


def test_upgrade_from_empty_matches_the_models(make_app):
    app = make_app(create_schema=False)
    with app.app_context():
        upgrade()
    engine = app.extensions["database"].engine
    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    assert "alembic_version" in tables
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "render_as_batch": True}
        )
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_seed_demo_after_upgrade_creates_a_workspace(make_app):
    app = make_app(create_schema=False)
    with app.app_context():
        upgrade()
    result = app.test_cli_runner().invoke(args=["seed-demo"])
    assert result.exit_code == 0, result.output
    assert "demo@loopdesk.local" in result.output
    login = app.test_client().get("/login")
    assert login.status_code == 200
