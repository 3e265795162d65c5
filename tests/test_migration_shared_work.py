"""1eb709272bf2: what a person made in a shared project outlives them. Rows made before
the migration are all kept; after it, deleting their maker (by the database's own rule,
as app/chat/person_deletion.py does) leaves them with the project, the maker NULL, while
the maker's personal project still goes with its rows. Down again, a makerless row goes
(it could name nobody) and every other is kept."""

from __future__ import annotations

from flask_migrate import downgrade, upgrade
from sqlalchemy import text

BEFORE = "5b88ec68b1b3"  # the revision before 1eb709272bf2
NOW = "2026-12-01 10:00:00"


def test_shared_work_keeps_its_rows_and_loses_only_its_makers_name(make_app):
    app = make_app(create_schema=False)
    with app.app_context():
        upgrade(revision=BEFORE)
    engine = app.extensions["database"].engine
    with engine.begin() as connection:

        def insert(sql: str, **values) -> int:
            return connection.execute(text(sql + " RETURNING id"), {"now": NOW, **values}).scalar()

        ada, bob = (
            insert(
                "INSERT INTO users (email, password_hash, display_name, is_admin, created_at)"
                " VALUES (:email, 'x', '', false, :now)",
                email=email,
            )
            for email in ("ada@example.com", "bob@example.com")
        )
        team = insert("INSERT INTO projects (name, created_at) VALUES ('Team', :now)")
        bobs_home = insert(
            "INSERT INTO projects (name, personal_user_id, created_at)"
            " VALUES ('Personal', :bob, :now)",
            bob=bob,
        )
        for project, name in ((team, "Team offer"), (bobs_home, "Bob's own offer")):
            insert(
                "INSERT INTO offers (user_id, project_id, name, description, audience, price,"
                " brand_colors, created_at, updated_at)"
                " VALUES (:bob, :project, :name, '', '', '', '[]', :now, :now)",
                bob=bob,
                project=project,
                name=name,
            )
        insert(
            "INSERT INTO outputs (user_id, project_id, agent, title, content, created_at)"
            " VALUES (:ada, :team, 'quiz', 'Ada''s quiz', '{}', :now)",
            ada=ada,
            team=team,
        )
    with app.app_context():
        upgrade()
    with engine.begin() as connection:
        offers = connection.execute(text("SELECT name FROM offers ORDER BY id")).scalars().all()
        assert offers == ["Team offer", "Bob's own offer"]
        connection.execute(text("DELETE FROM users WHERE id = :bob"), {"bob": bob})
        rows = connection.execute(text("SELECT name, user_id FROM offers")).all()
        assert [tuple(row) for row in rows] == [("Team offer", None)]
        if engine.dialect.name == "sqlite":
            for table in ("offers", "personas", "outputs", "visual_assets"):
                sql = connection.execute(
                    text("SELECT sql FROM sqlite_master WHERE name = :table"), {"table": table}
                ).scalar()
                assert "AUTOINCREMENT" in sql, table
    with app.app_context():
        downgrade(revision=BEFORE)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM offers")).scalar() == 0
        titles = connection.execute(text("SELECT title, user_id FROM outputs")).all()
        assert [tuple(row) for row in titles] == [("Ada's quiz", ada)]
