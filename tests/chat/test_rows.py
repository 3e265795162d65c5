"""The central insert path: sequences are dense and unique under concurrent writers."""

import threading

from sqlalchemy import select

from app.chat.conversations import create_conversation
from app.chat.models import Message
from app.chat.rows import insert_message
from tests.factories import rows_after


def _conversation(app, user_id):
    with app.extensions["database"].session() as session:
        conversation = create_conversation(session, user_id)
        session.commit()
        return conversation.id


def test_eight_writers_get_sequences_one_to_sixteen_hundred(app, auth):
    conversation_id = _conversation(app, auth.create())
    database = app.extensions["database"]
    errors = []

    def append_rows():
        try:
            for n in range(200):
                with database.session() as session:
                    insert_message(
                        session, conversation_id, role="user", kind="user", content=f"row {n}"
                    )
                    session.commit()
        except Exception as error:  # surfaced below: a writer must never see an error
            errors.append(error)

    writers = [threading.Thread(target=append_rows) for _ in range(8)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()

    assert errors == []
    with database.session() as session:
        sequences = session.scalars(
            select(Message.sequence)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.sequence)
        ).all()
    assert sequences == list(range(1, 1601))


def test_sequences_are_per_conversation(app, auth):
    user_id = auth.create()
    first, second = _conversation(app, user_id), _conversation(app, user_id)
    with app.extensions["database"].session() as session:
        for conversation_id in (first, second, first):
            insert_message(session, conversation_id, role="user", kind="user", content="hi")
        session.commit()
        assert [r.sequence for r in rows_after(session, first)] == [1, 2]
        assert [r.sequence for r in rows_after(session, second)] == [1]


def test_rolled_back_insert_leaves_no_row_and_no_gap(app, auth):
    conversation_id = _conversation(app, auth.create())
    with app.extensions["database"].session() as session:
        insert_message(session, conversation_id, role="user", kind="user", content="kept")
        session.commit()
        insert_message(session, conversation_id, role="assistant", kind="host", content="lost")
        session.rollback()
        insert_message(session, conversation_id, role="assistant", kind="host", content="next")
        session.commit()
        rows = rows_after(session, conversation_id)
    assert [(r.sequence, r.content) for r in rows] == [(1, "kept"), (2, "next")]


def test_a_row_is_hidden_by_its_meta(app, auth):
    conversation_id = _conversation(app, auth.create())
    with app.extensions["database"].session() as session:
        insert_message(session, conversation_id, role="user", kind="user", content="shown")
        insert_message(session, conversation_id, role="user", kind="user", meta={"hidden": True})
        session.commit()
        rows = rows_after(session, conversation_id, include_hidden=True)
        assert [(r.sequence, r.hidden) for r in rows] == [(1, False), (2, True)]
