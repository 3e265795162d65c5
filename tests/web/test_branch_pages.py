"""The chat page's branch routes (regenerate, edit, the pager): CSRF-protected posts on
the person's own chats, and what the page renders for them."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from tests.fake_model import Turn, text, tool_use
from tests.web.helpers import snapshot


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


def test_the_page_routes_are_csrf_protected_posts_and_own_their_chats(app, chat, fake_model):
    fake_model.script("First.", "Second.", "Hello again.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    htmx = {**chat.auth.headers(), "HX-Request": "true"}
    before = snapshot(app)
    for path, form in (
        ("regenerate", {"sequence": "2"}),
        ("edit", {"sequence": "1", "message": "Hey"}),
        ("branch", {"sequence": "1"}),
    ):
        refused = chat.client.post(f"/chats/{chat_id}/{path}", data=form)
        assert refused.status_code == 400, path  # no CSRF token
        assert chat.client.post(f"/chats/9999/{path}", data=form, headers=htmx).status_code == 404
        bad = chat.client.post(f"/chats/{chat_id}/{path}", data={"sequence": "x"}, headers=htmx)
        assert bad.status_code == 400, path
    assert snapshot(app) == before

    response = chat.client.post(
        f"/chats/{chat_id}/regenerate", data={"sequence": "2"}, headers=htmx
    )
    assert response.status_code == 200
    assert 'id="composer"' in response.get_data(as_text=True)
    chat.wait(_latest_run(app, chat_id))
    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert 'aria-label="Previous version"' in page and 'aria-label="Next version"' in page
    assert "Version 2 of 2" in page and 'aria-label="Regenerate this answer"' in page
    assert 'aria-label="Edit this message"' in page

    switched = chat.client.post(f"/chats/{chat_id}/branch", data={"sequence": "2"}, headers=htmx)
    assert switched.status_code == 204
    assert [r["sequence"] for r in chat.rows(chat_id)] == [1, 2]

    edited = chat.client.post(
        f"/chats/{chat_id}/edit", data={"sequence": "1", "message": "Hey"}, headers=htmx
    )
    assert edited.status_code == 200
    chat.wait(_latest_run(app, chat_id))
    assert [r["content"] for r in chat.rows(chat_id)] == ["Hey", "Hello again."]


def _latest_run(app, chat_id):
    from app.chat.models import Run

    with app.extensions["database"].session() as session:
        return session.scalar(
            select(Run.id).where(Run.conversation_id == chat_id).order_by(Run.id.desc()).limit(1)
        )


def test_an_answer_of_several_rows_carries_its_pager_and_regenerate_on_each_row(
    app, chat, fake_model
):
    """Every row of an answer renders the answer's one action row (the page's CSS shows the
    last one's): the pager of the answer's head, Regenerate and Copy; the person's message
    keeps its Edit."""
    import re

    fake_model.script(
        Turn(text("Looking."), tool_use("list_offers", {})),
        Turn(text("None yet.")),
        Turn(text("Checking."), tool_use("list_offers", {})),
        Turn(text("Still none.")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "What do I sell?"))
    htmx = {**chat.auth.headers(), "HX-Request": "true"}
    chat.client.post(f"/chats/{chat_id}/regenerate", data={"sequence": "4"}, headers=htmx)
    chat.wait(_latest_run(app, chat_id))
    assert [r["sequence"] for r in chat.rows(chat_id)] == [1, 5, 7]

    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    rows = {m[1]: m[0] for m in re.finditer(r'<article id="m-(\d+)".*?</article>', page, re.S)}
    assert 'aria-label="Edit this message"' in rows["1"] and "branch-pager" not in rows["1"]
    assert "Regenerate" not in rows["1"] and "data-copy" not in rows["1"]
    for sequence in ("5", "7"):
        row = rows[sequence]
        assert row.count('class="row-actions answer-actions"') == 1
        assert 'data-versions="2,5"' in row and "Version 2 of 2" in row
        assert 'hx-vals=\'{"sequence": "2"}\'' in row  # the previous answer's head
        assert 'aria-label="Regenerate this answer"' in row
        assert 'aria-label="Copy this answer as Markdown"' in row
        assert "Edit this message" not in row

    # A notice that ends an answer (Stop before any text) regenerates it too.
    from app.chat.rows import insert_message

    with app.extensions["database"].session() as session:
        notice = insert_message(
            session, chat_id, role="assistant", kind="notice", content="Stopped."
        ).sequence
        session.commit()
    fake_model.script("Third.")
    response = chat.client.post(
        f"/chats/{chat_id}/regenerate", data={"sequence": str(notice)}, headers=htmx
    )
    assert response.status_code == 200
    chat.wait(_latest_run(app, chat_id))
    assert [r["content"] for r in chat.rows(chat_id)][-1] == "Third."
    assert chat.rows(chat_id)[1]["siblings"] == [2, 5, notice + 1]
