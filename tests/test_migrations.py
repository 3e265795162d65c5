"""The schema comes from Alembic: upgrade from empty works and matches the models."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import upgrade
from sqlalchemy import inspect

from app.chat.search_index import include_in_comparison
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
            connection,
            opts={
                "compare_type": True,
                "render_as_batch": True,
                "include_object": include_in_comparison,
            },
        )
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_every_foreign_key_leads_an_index_after_upgrade(make_app):
    """Deleting a row (a person, a chat, an asset) finds the rows that name it by an index:
    a foreign key column that leads no index made every such delete read its whole table
    (a person's deletion read every memory change, share and invitation there is)."""
    app = make_app(create_schema=False)
    with app.app_context():
        upgrade()
    schema = inspect(app.extensions["database"].engine)
    unindexed = []
    for table in schema.get_table_names():
        led = {tuple(index["column_names"][:1]) for index in schema.get_indexes(table)}
        led |= {
            tuple(unique["column_names"][:1]) for unique in schema.get_unique_constraints(table)
        }
        led.add(tuple(schema.get_pk_constraint(table)["constrained_columns"][:1]))
        for key in schema.get_foreign_keys(table):
            if tuple(key["constrained_columns"][:1]) not in led:
                unindexed.append(f"{table}.{', '.join(key['constrained_columns'])}")
    assert unindexed == []


def test_seed_demo_after_upgrade_creates_a_workspace(make_app):
    app = make_app(create_schema=False)
    with app.app_context():
        upgrade()
    result = app.test_cli_runner().invoke(args=["seed-demo"])
    assert result.exit_code == 0, result.output
    assert "demo@loopdesk.local" in result.output
    login = app.test_client().get("/login")
    assert login.status_code == 200


BEFORE_TITLES = "e3508c439509"  # the revision before f127f3b6f14d


def test_title_source_and_never_reused_ids_keep_every_row(make_app):
    """f127f3b6f14d: existing titles count as the person's; on SQLite the public-id tables
    are rebuilt with AUTOINCREMENT without losing (or cascading away) a single row."""
    from sqlalchemy import text

    app = make_app(create_schema=False)
    with app.app_context():
        upgrade(revision=BEFORE_TITLES)
    engine = app.extensions["database"].engine
    now = {"now": "2026-12-01 10:00:00"}
    with engine.begin() as connection:

        def insert(sql: str, **values) -> int:
            return connection.execute(text(sql + " RETURNING id"), {**now, **values}).scalar()

        user = insert(
            "INSERT INTO users (email, password_hash, display_name, is_admin, created_at)"
            " VALUES ('ada@example.com', 'x', 'Ada', false, :now)"
        )
        chats = [
            insert(
                "INSERT INTO conversations (user_id, title, status, tool_phase,"
                " summarized_up_to_sequence, created_at, updated_at)"
                " VALUES (:user, :title, 'IDLE', 'discovery', 0, :now, :now)",
                user=user,
                title=title,
            )
            for title in ("New chat", "Launch plan")
        ]
        chat = chats[1]
        insert(
            "INSERT INTO messages (conversation_id, sequence, role, kind, content, meta,"
            " created_at) VALUES (:chat, 1, 'user', 'user', 'hello', '{}', :now)",
            chat=chat,
        )
        run = insert(
            'INSERT INTO runs (conversation_id, user_id, status, "trigger", iterations,'
            " created_at) VALUES (:chat, :user, 'completed', 'message', 1, :now)",
            chat=chat,
            user=user,
        )
        insert(
            "INSERT INTO run_log_entries (run_id, conversation_id, at, kind, data)"
            " VALUES (:run, :chat, :now, 'model_call', '{}')",
            run=run,
            chat=chat,
        )
        insert(
            "INSERT INTO outputs (user_id, conversation_id, agent, title, content, created_at)"
            " VALUES (:user, :chat, 'quiz', 'A quiz', '{}', :now)",
            user=user,
            chat=chat,
        )
    with app.app_context():
        upgrade()

    with engine.begin() as connection:
        sources = dict(
            connection.execute(text("SELECT title, title_source FROM conversations")).all()
        )
        assert sources == {"New chat": "default", "Launch plan": "person"}
        for table, expected in (
            ("messages", 1),
            ("runs", 1),
            ("run_log_entries", 1),
            ("outputs", 1),
        ):
            assert connection.execute(text(f"SELECT count(*) FROM {table}")).scalar() == expected
        assert connection.execute(text("SELECT conversation_id FROM outputs")).scalar() == chat
        if engine.dialect.name == "sqlite":
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            autoincrement = {
                name
                for name, ddl in connection.execute(
                    text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
                )
                if "AUTOINCREMENT" in (ddl or "")
            }
            # The migration's tables are exactly the models' never-reused ones.
            assert autoincrement == {
                table.name
                for table in Base.metadata.sorted_tables
                if table.dialect_options["sqlite"]["autoincrement"]
            }
            assert {"conversations", "messages", "runs", "offers", "personas", "outputs"} <= (
                autoincrement
            )
            assert "visual_assets" in autoincrement
        # Foreign keys work again: deleting the chat takes its rows with it.
        connection.execute(text("DELETE FROM conversations WHERE id = :chat"), {"chat": chat})
        assert connection.execute(text("SELECT count(*) FROM messages")).scalar() == 0
        assert connection.execute(text("SELECT conversation_id FROM outputs")).scalar() is None
    with app.extensions["database"].session() as session:
        from app.chat.conversations import create_conversation

        assert create_conversation(session, user).id > chat  # not the deleted one's again
        session.commit()


def test_public_ids_are_never_reused_after_a_delete(app):
    """The newest row deleted, the next one gets a new id (SQLite: AUTOINCREMENT)."""
    from app.accounts.service import create_user
    from app.chat.conversations import create_conversation
    from app.chat.models import Message, Run
    from app.chat.rows import insert_message
    from app.workspace.models import Offer, Output, Persona, VisualAsset

    database = app.extensions["database"]
    with database.session() as session:
        user = create_user(session, "ada@example.com", "correct horse battery")
        chat = create_conversation(session, user.id)
        session.commit()
        makers = {
            Offer: lambda: Offer(user_id=user.id, name="An offer"),
            Persona: lambda: Persona(user_id=user.id, name="A persona"),
            Output: lambda: Output(user_id=user.id, agent="quiz", title="A quiz", content={}),
            VisualAsset: lambda: VisualAsset(user_id=user.id, title="An image"),
            Run: lambda: Run(conversation_id=chat.id, user_id=user.id, status="completed"),
        }
        for model, make in makers.items():
            first = make()
            session.add(first)
            session.commit()
            session.delete(first)
            session.commit()
            second = make()
            session.add(second)
            session.commit()
            assert second.id > first.id, model.__tablename__
        first = insert_message(session, chat.id, role="user", kind="user", content="a")
        session.commit()
        session.delete(session.get(Message, first.id))
        session.commit()
        second = insert_message(session, chat.id, role="user", kind="user", content="b")
        session.commit()
        assert second.id > first.id


def test_branches_migration_reads_existing_conversations_as_one_straight_branch(make_app):
    """b5d2e8f41c7a: rows written before it follow the row before them."""
    from flask_migrate import downgrade
    from sqlalchemy import select

    from app.accounts.service import create_user
    from app.chat.conversations import create_conversation
    from app.chat.models import Conversation, Message
    from app.chat.rows import insert_message

    app = make_app(create_schema=False)
    database = app.extensions["database"]
    with app.app_context():
        upgrade()
        with database.session() as session:
            user = create_user(session, "ada@example.com", "correct horse battery")
            chats = [create_conversation(session, user.id).id for _ in range(2)]
            for chat_id, count in zip(chats, (3, 2), strict=True):
                for n in range(count):
                    insert_message(session, chat_id, role="user", kind="user", content=f"m{n}")
            session.commit()
        downgrade(revision="f127f3b6f14d")
        upgrade()
    with database.session() as session:
        parents = {
            chat_id: session.scalars(
                select(Message.parent_sequence)
                .where(Message.conversation_id == chat_id)
                .order_by(Message.sequence)
            ).all()
            for chat_id in chats
        }
        branches = session.execute(
            select(Conversation.branch_leaf_sequence, Conversation.branch_chosen_at_sequence)
        ).all()
    assert parents == {chats[0]: [None, 1, 2], chats[1]: [None, 1]}
    assert {tuple(b) for b in branches} == {(None, None)}


BEFORE_SESSIONS = "b5d2e8f41c7a"  # the revision before sessions and token scopes


def test_old_tokens_keep_what_they_could_do_and_old_sessions_start_at_generation_0(make_app):
    """19a1c3e5f7b9: tokens made before scopes keep read and chat, an admin's keep admin
    too (they could do anything); every account starts at session generation 0."""
    from sqlalchemy import text

    app = make_app(create_schema=False)
    with app.app_context():
        upgrade(revision=BEFORE_SESSIONS)
    engine = app.extensions["database"].engine
    with engine.begin() as connection:
        for email, admin in (("ada@example.com", False), ("root@example.com", True)):
            user = connection.execute(
                text(
                    "INSERT INTO users (email, password_hash, display_name, is_admin, created_at)"
                    " VALUES (:email, 'x', '', :admin, '2026-12-01 10:00:00') RETURNING id"
                ),
                {"email": email, "admin": admin},
            ).scalar()
            connection.execute(
                text(
                    "INSERT INTO api_tokens (user_id, name, token_hash, display_prefix, created_at)"
                    " VALUES (:user, 't', :hash, 'ld_', '2026-12-01 10:00:00')"
                ),
                {"user": user, "hash": email},
            )
    with app.app_context():
        upgrade()
    with engine.connect() as connection:
        scopes = dict(
            connection.execute(
                text(
                    "SELECT users.email, api_tokens.scopes FROM api_tokens"
                    " JOIN users ON users.id = api_tokens.user_id"
                )
            ).all()
        )
        generations = connection.execute(text("SELECT session_generation FROM users")).scalars()
        assert list(generations) == [0, 0]
        if engine.dialect.name == "sqlite":  # rebuilt so a deleted person's id is never reused
            sql = connection.execute(
                text("SELECT sql FROM sqlite_master WHERE name = 'users'")
            ).scalar()
            assert "AUTOINCREMENT" in sql
    assert scopes == {"ada@example.com": "read chat", "root@example.com": "read chat admin"}


def test_rows_indexed_before_are_indexed_again_by_what_a_person_reads(make_app):
    """30b8e1c4d7a2: a card indexed with its options' data is found only by its words."""
    from flask_migrate import downgrade
    from sqlalchemy import text

    from app.accounts.service import create_user
    from app.chat.conversations import create_conversation
    from app.chat.rows import insert_message
    from app.chat.search import search

    app = make_app(create_schema=False)
    database = app.extensions["database"]
    with app.app_context():
        upgrade()
        with database.session() as session:
            user_id = create_user(session, "ada@example.com", "correct horse battery").id
            chat_id = create_conversation(session, user_id).id
            row = insert_message(
                session, chat_id, role="assistant", kind="host", content="Pick a sundae"
            )
            # What the index held before: the row's text and its card's data.
            key = "rowid" if session.get_bind().dialect.name == "sqlite" else "message_id"
            session.execute(
                text(f"UPDATE message_search SET body = :body WHERE {key} = :id"),
                {"body": "Pick a sundae\n/workspace/assets/9\nUse this offer", "id": row.id},
            )
            session.commit()
        downgrade(revision="18a3c6e9d2f1")
        upgrade()
    with database.session() as session:
        assert search(session, user_id, "assets").hits == []
        assert [h.sequence for h in search(session, user_id, "sundae").hits] == [1]


BEFORE_PROJECTS = "41123088a987"  # the revision before projects


def test_projects_migration_puts_every_row_in_its_makers_personal_project(make_app):
    """5b88ec68b1b3: each person gets a personal project they own, and their chats and
    workspace rows move into it, every row kept."""
    from sqlalchemy import text

    app = make_app(create_schema=False)
    with app.app_context():
        upgrade(revision=BEFORE_PROJECTS)
    engine = app.extensions["database"].engine
    now = {"now": "2026-12-01 10:00:00"}
    tables = ("offers", "personas", "visual_assets", "outputs", "characters", "campaigns")
    with engine.begin() as connection:

        def insert(sql: str, **values) -> int:
            return connection.execute(text(sql + " RETURNING id"), {**now, **values}).scalar()

        people = {}
        for email in ("ada@example.com", "bob@example.com"):
            user = insert(
                "INSERT INTO users (email, password_hash, display_name, is_admin, created_at)"
                " VALUES (:email, 'x', '', false, :now)",
                email=email,
            )
            people[email] = user
            insert(
                "INSERT INTO conversations (user_id, title, status, tool_phase,"
                " summarized_up_to_sequence, created_at, updated_at)"
                " VALUES (:user, 'Plan', 'IDLE', 'discovery', 0, :now, :now)",
                user=user,
            )
            insert(
                "INSERT INTO offers (user_id, name, description, audience, price,"
                " brand_colors, created_at, updated_at)"
                " VALUES (:user, 'Offer', '', '', '', '[]', :now, :now)",
                user=user,
            )
            insert(
                "INSERT INTO personas (user_id, name, description, pains, goals, created_at,"
                " updated_at) VALUES (:user, 'P', '', '', '', :now, :now)",
                user=user,
            )
            insert(
                "INSERT INTO visual_assets (user_id, kind, title, prompt, preset, content_type,"
                " meta, created_at) VALUES (:user, 'image', 'A', '', '', 'image/png', '{}', :now)",
                user=user,
            )
            insert(
                "INSERT INTO outputs (user_id, agent, title, content, created_at)"
                " VALUES (:user, 'quiz', 'Q', '{}', :now)",
                user=user,
            )
            insert(
                "INSERT INTO characters (user_id, name, description, created_at)"
                " VALUES (:user, 'C', '', :now)",
                user=user,
            )
            insert(
                "INSERT INTO campaigns (user_id, name, status, briefing, created_at, updated_at)"
                " VALUES (:user, 'C', 'draft', '{}', :now, :now)",
                user=user,
            )
    with app.app_context():
        upgrade()
    with engine.connect() as connection:
        personal = dict(
            connection.execute(
                text(
                    "SELECT m.user_id, p.id FROM projects p JOIN project_members m"
                    " ON m.project_id = p.id WHERE m.role = 'owner'"
                    " AND p.personal_user_id = m.user_id AND p.name = 'Personal'"
                )
            ).all()
        )
        assert set(personal) == set(people.values())
        for table in (*tables, "conversations"):
            rows = connection.execute(text(f"SELECT user_id, project_id FROM {table}")).all()
            assert len(rows) == 2, table
            assert all(project == personal[user] for user, project in rows), table
        if engine.dialect.name == "sqlite":
            ddl = connection.execute(
                text("SELECT sql FROM sqlite_master WHERE name = 'offers'")
            ).scalar()
            assert "AUTOINCREMENT" in ddl
    from app.accounts.models import User
    from tests.factories import PASSWORD, AuthActions

    with app.extensions["database"].session() as session:
        session.get(User, people["ada@example.com"]).set_password(PASSWORD)
        session.commit()
    auth = AuthActions(app, app.test_client())
    auth.login("ada@example.com")
    offers = auth.client.get("/api/offers").get_json()["items"]
    assert [offer["name"] for offer in offers] == ["Offer"]  # hers, as before


BEFORE_SHARES = "a3485b2c9bed"  # the revision before 80354337275b (chat_shares)


def test_chat_shares_arrive_beside_every_chat_and_leave_them_on_downgrade(make_app):
    """80354337275b: a new table; the chats already there stay, on the way down too."""
    from flask_migrate import downgrade
    from sqlalchemy import text

    app = make_app(create_schema=False)
    with app.app_context():
        upgrade(revision=BEFORE_SHARES)
    engine = app.extensions["database"].engine
    with engine.begin() as connection:
        user = connection.execute(
            text(
                "INSERT INTO users (email, password_hash, display_name, is_admin, created_at)"
                " VALUES ('ada@example.com', 'x', '', false, '2026-12-01 10:00:00') RETURNING id"
            )
        ).scalar()
        connection.execute(
            text(
                "INSERT INTO conversations (user_id, title, status, tool_phase,"
                " summarized_up_to_sequence, created_at, updated_at)"
                " VALUES (:user, 'Kept', 'IDLE', 'discovery', 0,"
                " '2026-12-01 10:00:00', '2026-12-01 10:00:00')"
            ),
            {"user": user},
        )
    with app.app_context():
        upgrade()
    with engine.begin() as connection:
        chat = connection.execute(
            text("SELECT id FROM conversations WHERE title = 'Kept'")
        ).scalar()
        connection.execute(
            text(
                "INSERT INTO chat_shares (conversation_id, token_digest, created_by, created_at)"
                " VALUES (:chat, 'digest', :user, '2026-12-01 10:00:00')"
            ),
            {"chat": chat, "user": user},
        )
        if engine.dialect.name == "sqlite":  # a share's id is never handed out again
            sql = connection.execute(
                text("SELECT sql FROM sqlite_master WHERE name = 'chat_shares'")
            ).scalar()
            assert "AUTOINCREMENT" in sql
    with app.app_context():
        downgrade(revision=BEFORE_SHARES)
    with engine.connect() as connection:
        titles = connection.execute(text("SELECT title FROM conversations")).scalars().all()
    assert titles == ["Kept"]
    assert "chat_shares" not in inspect(engine).get_table_names()


BEFORE_EMAIL = "80354337275b"  # the revision before email tokens and confirmed addresses


def test_accounts_from_before_email_confirmation_count_as_confirmed(make_app):
    """42848bf167d0: every existing account keeps working with VERIFY_EMAIL on (its
    address counts as confirmed), and nothing of it is lost."""
    from sqlalchemy import text

    app = make_app(create_schema=False)
    with app.app_context():
        upgrade(revision=BEFORE_EMAIL)
    engine = app.extensions["database"].engine
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO users (email, password_hash, display_name, is_admin, created_at)"
                " VALUES ('ada@example.com', 'x', 'Ada', false, '2026-12-01 10:00:00')"
            )
        )
    with app.app_context():
        upgrade()
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT email, display_name, email_verified_at FROM users")
        ).all()
    assert [(email, name) for email, name, _ in rows] == [("ada@example.com", "Ada")]
    assert rows[0].email_verified_at is not None


BEFORE_ORGANIZE = "42848bf167d0"  # the revision before pins, folders and the archive


def test_chats_before_pins_folders_and_archive_keep_every_row_and_their_ids(make_app):
    """41123088a987: existing chats stay, unpinned, in no folder, not archived; the table
    keeps its AUTOINCREMENT on SQLite (plain ALTER TABLE, no copy); down and up again."""
    from flask_migrate import downgrade
    from sqlalchemy import text

    app = make_app(create_schema=False)
    with app.app_context():
        upgrade(revision=BEFORE_ORGANIZE)
    engine = app.extensions["database"].engine
    with engine.begin() as connection:
        user = connection.execute(
            text(
                "INSERT INTO users (email, password_hash, display_name, is_admin, created_at)"
                " VALUES ('ada@example.com', 'x', 'Ada', false, '2026-12-01') RETURNING id"
            )
        ).scalar()
        chat = connection.execute(
            text(
                "INSERT INTO conversations (user_id, title, status, tool_phase,"
                " summarized_up_to_sequence, created_at, updated_at) VALUES (:user,"
                " 'Launch plan', 'IDLE', 'discovery', 0, '2026-12-01', '2026-12-01') RETURNING id"
            ),
            {"user": user},
        ).scalar()
    with app.app_context():
        upgrade()
        downgrade(revision=BEFORE_ORGANIZE)
        upgrade()
    with engine.begin() as connection:
        rows = connection.execute(
            text("SELECT id, title, pinned_at, archived_at, folder FROM conversations")
        ).all()
        assert [tuple(row) for row in rows] == [(chat, "Launch plan", None, None, None)]
        if engine.dialect.name == "sqlite":
            sql = connection.execute(
                text("SELECT sql FROM sqlite_master WHERE name = 'conversations'")
            ).scalar()
            assert "AUTOINCREMENT" in sql


BEFORE_PROJECT_USAGE = "1eb709272bf2"  # the revision before c7e2a4d91f36


def test_usage_events_take_their_chats_project_and_keep_every_row(make_app):
    """c7e2a4d91f36: each usage event gets its chat's project; one whose chat is gone gets
    none (it still counts for its person); down and up again keeps every row."""
    from flask_migrate import downgrade
    from sqlalchemy import text

    app = make_app(create_schema=False)
    with app.app_context():
        upgrade(revision=BEFORE_PROJECT_USAGE)
    engine = app.extensions["database"].engine

    def insert(connection, sql: str, **values) -> int:
        return connection.execute(text(sql + " RETURNING id"), values).scalar()

    with engine.begin() as connection:
        user = insert(
            connection,
            "INSERT INTO users (email, password_hash, display_name, is_admin, created_at)"
            " VALUES ('ada@example.com', 'x', 'Ada', false, '2026-12-01')",
        )
        project = insert(
            connection,
            "INSERT INTO projects (name, created_at) VALUES ('Launch', '2026-12-01')",
        )
        chat = insert(
            connection,
            "INSERT INTO conversations (user_id, project_id, title, status, tool_phase,"
            " summarized_up_to_sequence, created_at, updated_at) VALUES (:user, :project,"
            " 'Launch plan', 'IDLE', 'discovery', 0, '2026-12-01', '2026-12-01')",
            user=user,
            project=project,
        )
        events = [
            insert(
                connection,
                "INSERT INTO usage_events (idempotency_key, user_id, conversation_id, model,"
                " billable_tool_calls, credits, month, created_at) VALUES (:key, :user, :chat,"
                " 'm', 0, :credits, '2026-12', '2026-12-01')",
                key=key,
                user=user,
                chat=conversation,
                credits=credits,
            )
            for key, conversation, credits in (("a", chat, 3), ("b", None, 5))
        ]
    with app.app_context():
        upgrade()
    read = "SELECT id, conversation_id, project_id, credits FROM usage_events ORDER BY id"
    with engine.connect() as connection:
        rows = [tuple(row) for row in connection.execute(text(read))]
    assert rows == [(events[0], chat, project, 3), (events[1], None, None, 5)]
    with app.app_context():
        downgrade(revision=BEFORE_PROJECT_USAGE)
        upgrade()
    with engine.connect() as connection:
        assert [tuple(row) for row in connection.execute(text(read))] == rows


def test_usage_events_stay_when_their_person_is_deleted_after_upgrade(make_app):
    """9d3f1c2b7a64: the database sets a deleted person's usage events' user_id NULL (they
    stay in their projects' totals); downgrading drops those, as the old rule would have."""
    from flask_migrate import downgrade
    from sqlalchemy import text

    app = make_app(create_schema=False)
    with app.app_context():
        upgrade()
    engine = app.extensions["database"].engine
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
        user = connection.execute(
            text(
                "INSERT INTO users (email, password_hash, display_name, is_admin, created_at)"
                " VALUES ('ada@example.com', 'x', 'Ada', false, '2026-12-01') RETURNING id"
            )
        ).scalar()
        connection.execute(
            text(
                "INSERT INTO usage_events (idempotency_key, user_id, model, billable_tool_calls,"
                " credits, month, created_at) VALUES ('a', :user, 'm', 0, 3, '2026-12',"
                " '2026-12-01')"
            ),
            {"user": user},
        )
        connection.execute(text("DELETE FROM users WHERE id = :user"), {"user": user})
    read = "SELECT user_id, credits FROM usage_events"
    with engine.connect() as connection:
        assert [tuple(row) for row in connection.execute(text(read))] == [(None, 3)]
    with app.app_context():
        downgrade(revision="c7e2a4d91f36")
    with engine.connect() as connection:
        assert connection.execute(text(read)).all() == []


def test_search_index_keeps_every_row_when_its_prefixes_come_and_go(make_app):
    """9e4b7c2a5d18: SQLite's index is made again with prefixes kept (and without, on
    downgrade); the rows indexed before are found by a prefix either way."""
    from flask_migrate import downgrade
    from sqlalchemy import text

    from app.accounts.service import create_user
    from app.chat.conversations import create_conversation
    from app.chat.rows import insert_message
    from app.chat.search import search

    app = make_app(create_schema=False)
    database = app.extensions["database"]
    sqlite = database.engine.dialect.name == "sqlite"
    definition = text("SELECT sql FROM sqlite_master WHERE name = 'message_search'")
    with app.app_context():
        upgrade()
        with database.session() as session:
            user_id = create_user(session, "ada@example.com", "correct horse battery").id
            chat_id = create_conversation(session, user_id).id
            for words in ("Launching the autumn menu", "Pistachio gelato is back"):
                insert_message(session, chat_id, role="user", kind="user", content=words)
            session.commit()
        for move, revision, prefixes in (
            (downgrade, "5c1d9e7a3b20", False),
            (upgrade, "head", True),
        ):
            move(revision=revision)
            with database.session() as session:
                if sqlite:
                    assert ("prefix=" in session.execute(definition).scalar()) == prefixes
                assert [h.sequence for h in search(session, user_id, "launc").hits] == [1]
                assert [h.sequence for h in search(session, user_id, "pistach").hits] == [2]
