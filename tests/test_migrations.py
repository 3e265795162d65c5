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
        downgrade(revision="e3508c439509")
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
