"""Regenerate and edit as branches (docs/CONTRACT.md): the conversation is a tree, one
branch is shown, and the model only ever sees the shown branch."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import select, update

from app.chat.models import Conversation, Message
from tests.factories import add_token, add_user
from tests.fake_model import Turn, text, tool_use
from tests.waiting import eventually, scaled
from tests.web.helpers import snapshot


def _user(role_text):
    return {"role": "user", "content": [{"type": "text", "text": role_text}]}


def _texts(request):
    """Each message of a model request as (role, its text blocks joined)."""
    found = []
    for message in request["messages"]:
        parts = []
        for block in message["content"]:
            if block["type"] == "text":
                parts.append(block["text"])
            elif block["type"] == "tool_use":
                parts.append(f"[{block['name']}]")
            elif block["type"] == "tool_result":
                parts.append(f"[result {block['content']}]")
        found.append((message["role"], " ".join(parts)))
    return found


def _shown(rows):
    return [(r["sequence"], r["kind"], r["content"]) for r in rows]


def _all_rows(app, chat_id):
    with app.extensions["database"].session() as session:
        return session.scalars(
            select(Message).where(Message.conversation_id == chat_id).order_by(Message.sequence)
        ).all()


def _put_branch(chat, chat_id, sequence):
    return chat.client.put(
        f"/api/chats/{chat_id}/branch", json={"sequence": sequence}, headers=chat.auth.headers()
    )


def _loop(chat, chat_id, body):
    return chat.post(f"/api/chats/{chat_id}/loop", body)


def _run_of(response):
    assert response.status_code == 202, response.get_json()
    return response.get_json()["runId"]


@pytest.fixture
def script_client(app, chat):
    """A second client of Ada's: a script with her bearer token, no cookies."""
    with app.extensions["database"].session() as session:
        from app.accounts.models import User

        user_id = session.scalar(select(User.id).where(User.email == "ada@example.com"))
    _, raw = add_token(app, user_id)
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {raw}"
    return client


def test_regenerate_answers_the_same_message_beside_the_old_answer(
    app, chat, fake_model, script_client
):
    fake_model.script("First answer.", "Second answer.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Give me a headline"))

    run = chat.wait(_run_of(_loop(chat, chat_id, {"regenerate": 2})))

    assert run["status"] == "completed"
    rows = chat.rows(chat_id)
    assert _shown(rows) == [(1, "user", "Give me a headline"), (3, "host", "Second answer.")]
    assert rows[0]["parent"] is None and rows[0]["siblings"] == [1]
    assert rows[1]["parent"] == 1 and rows[1]["siblings"] == [2, 3]
    # The new answer was asked for with the person's message alone.
    assert fake_model.requests[1]["messages"] == [_user("Give me a headline")]

    chosen = _put_branch(chat, chat_id, 2)
    assert chosen.status_code == 200
    body = chosen.get_json()
    assert _shown(body["messages"]) == [
        (1, "user", "Give me a headline"),
        (2, "host", "First answer."),
    ]
    assert body["messages"][1]["siblings"] == [2, 3] and body["leaf"] == 2

    # The choice is stored: another client (a script) sees the same branch.
    seen = script_client.get(f"/api/chats/{chat_id}/messages").get_json()["messages"]
    assert _shown(seen) == _shown(body["messages"])

    # Going on from the first answer: the model sees that branch only.
    fake_model.script("Third answer.")
    chat.wait(chat.send(chat_id, "Shorter please"))
    assert _texts(fake_model.requests[2]) == [
        ("user", "Give me a headline"),
        ("assistant", "First answer."),
        ("user", "Shorter please"),
    ]
    assert _shown(chat.rows(chat_id)) == [
        (1, "user", "Give me a headline"),
        (2, "host", "First answer."),
        (4, "user", "Shorter please"),
        (5, "host", "Third answer."),
    ]
    assert [row.sequence for row in _all_rows(app, chat_id)] == [1, 2, 3, 4, 5]
    assert [row.parent_sequence for row in _all_rows(app, chat_id)] == [None, 1, 1, 2, 4]
    assert fake_model.rejections == []


def test_edit_makes_a_new_version_of_a_message_answered_anew(app, chat, fake_model):
    fake_model.script("Hello.", "Blue is calm.", "Red is bold.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    chat.wait(chat.send(chat_id, "Tell me about blue"))

    body = {"edit": {"sequence": 3, "message": "Tell me about red"}}
    run = chat.wait(_run_of(_loop(chat, chat_id, body)))

    assert run["status"] == "completed"
    rows = chat.rows(chat_id)
    assert _shown(rows) == [
        (1, "user", "Hi"),
        (2, "host", "Hello."),
        (5, "user", "Tell me about red"),
        (6, "host", "Red is bold."),
    ]
    assert rows[2]["parent"] == 2 and rows[2]["siblings"] == [3, 5]
    assert rows[3]["siblings"] == [6]
    assert _texts(fake_model.requests[2]) == [
        ("user", "Hi"),
        ("assistant", "Hello."),
        ("user", "Tell me about red"),
    ]

    assert _put_branch(chat, chat_id, 3).status_code == 200
    assert _shown(chat.rows(chat_id)) == [
        (1, "user", "Hi"),
        (2, "host", "Hello."),
        (3, "user", "Tell me about blue"),
        (4, "host", "Blue is calm."),
    ]
    # Choosing a row on the branch already shown changes nothing.
    assert _put_branch(chat, chat_id, 1).get_json()["leaf"] == 4
    assert fake_model.rejections == []


def test_editing_the_first_message_forks_at_the_root(app, chat, fake_model):
    fake_model.script("About cats.", "About dogs.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Cats"))

    chat.wait(_run_of(_loop(chat, chat_id, {"edit": {"sequence": 1, "message": "Dogs"}})))

    rows = chat.rows(chat_id)
    assert _shown(rows) == [(3, "user", "Dogs"), (4, "host", "About dogs.")]
    assert rows[0]["parent"] is None and rows[0]["siblings"] == [1, 3]
    assert fake_model.requests[1]["messages"] == [_user("Dogs")]
    assert fake_model.rejections == []


def test_an_answer_that_opens_with_a_tool_call_is_paged_on_its_first_visible_row(
    app, chat, fake_model
):
    fake_model.script(
        Turn(tool_use("list_offers", {})),  # no text: a hidden row
        Turn(text("You have no offers yet.")),
        Turn(text("Let us set one up.")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "What do I sell?"))
    assert _shown(chat.rows(chat_id))[1] == (4, "host", "You have no offers yet.")

    chat.wait(_run_of(_loop(chat, chat_id, {"regenerate": 4})))

    rows = chat.rows(chat_id)
    assert _shown(rows) == [(1, "user", "What do I sell?"), (5, "host", "Let us set one up.")]
    assert rows[1]["siblings"] == [4, 5]
    assert fake_model.requests[2]["messages"] == [_user("What do I sell?")]

    # Back to the first answer (by the sequence of its head): its tool pair is whole again.
    assert _put_branch(chat, chat_id, 4).status_code == 200
    fake_model.script("Fine.")
    chat.wait(chat.send(chat_id, "Thanks"))
    sent = _texts(fake_model.requests[3])
    assert [role for role, _ in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert sent[1] == ("assistant", "[list_offers]")
    assert sent[3:] == [("assistant", "You have no offers yet."), ("user", "Thanks")]
    assert fake_model.requests[3]["messages"][2]["content"][0]["type"] == "tool_result"
    assert fake_model.rejections == []


def _offer(app, chat):
    from app.accounts.models import User
    from app.workspace.models import Offer

    with app.extensions["database"].session() as session:
        user_id = session.scalar(select(User.id).where(User.email == "ada@example.com"))
        session.add(Offer(user_id=user_id, name="Calm Mornings", description="Coaching"))
        session.commit()


def test_a_card_waiting_on_a_branch_that_is_left_is_dismissed(app, chat, fake_model):
    _offer(app, chat)
    fake_model.script(
        Turn(text("Which offer?"), tool_use("select_offer", {}, id="toolu_pick")),
        Turn(text("Here are three ideas instead.")),
    )
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "Ideas please"))
    assert run["status"] == "awaiting"
    card_seq = chat.rows(chat_id)[1]["sequence"]

    chat.wait(_run_of(_loop(chat, chat_id, {"regenerate": card_seq})))

    rows = chat.rows(chat_id)
    assert _shown(rows)[-1][2] == "Here are three ideas instead."
    assert rows[-1]["siblings"] == [card_seq, rows[-1]["sequence"]]
    hidden = [r for r in _all_rows(app, chat_id) if r.kind == "tool_result"]
    assert len(hidden) == 1 and hidden[0].parent_sequence == card_seq
    assert json.loads(hidden[0].meta["blocks"][0]["content"]) == {"dismissed": True}

    # Back on the card's branch the card shows as dismissed, and going on stays valid.
    assert _put_branch(chat, chat_id, card_seq).status_code == 200
    back = chat.rows(chat_id)
    assert back[-1]["card"]["status"] == "dismissed"
    assert chat.answer(chat_id, "toolu_pick", {"offer_id": 1}).status_code == 409
    fake_model.script("Sure.")
    chat.wait(chat.send(chat_id, "Go on"))
    assert _texts(fake_model.requests[2])[1:] == [
        ("assistant", "Which offer? [select_offer]"),
        ("user", '[result {"dismissed": true}] Go on'),
    ]
    assert fake_model.rejections == []


def test_editing_a_message_that_dismissed_a_card_dismisses_it_with_the_new_words(
    app, chat, fake_model
):
    _offer(app, chat)
    fake_model.script(
        Turn(text("Which offer?"), tool_use("select_offer", {}, id="toolu_pick")),
        "Blue it is.",
        "Red it is.",
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Colours"))
    chat.wait(chat.send(chat_id, "Use blue"))  # dismisses the card
    user_seq = chat.rows(chat_id)[2]["sequence"]

    chat.wait(_run_of(_loop(chat, chat_id, {"edit": {"sequence": user_seq, "message": "Use red"}})))

    rows = chat.rows(chat_id)
    assert [r["content"] for r in rows[2:]] == ["Use red", "Red it is."]
    assert rows[2]["siblings"] == [user_seq, rows[2]["sequence"]]
    assert _texts(fake_model.requests[2])[-1] == (
        "user",
        '[result {"dismissed": true, "user_message": "Use red"}] Use red',
    )
    assert fake_model.rejections == []


def test_branch_changes_are_refused_while_a_run_is_in_flight(app, chat, fake_model):
    fake_model.script("Done.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "One"))
    fake_model.script(Turn(text("slow " * 60), token_delay=0.05))
    run_id = chat.send(chat_id, "Two")
    fake_model.wait_for_requests(2)
    before = [r.sequence for r in _all_rows(app, chat_id)]

    for response in (
        _loop(chat, chat_id, {"regenerate": 2}),
        _loop(chat, chat_id, {"edit": {"sequence": 1, "message": "Uno"}}),
        _put_branch(chat, chat_id, 2),
    ):
        assert response.status_code == 409
        assert response.get_json()["error"]["code"] == "RUN_IN_FLIGHT"
    assert [r.sequence for r in _all_rows(app, chat_id)] == before
    chat.client.post(f"/api/chats/{chat_id}/stop", headers=chat.auth.headers())
    chat.wait(run_id)


def test_other_peoples_chats_and_sequences_that_do_not_fit_are_404(app, chat, fake_model):
    fake_model.script("Hello.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    other_id = add_user(app, "grace@example.com")
    with app.extensions["database"].session() as session:
        from app.chat.conversations import create_conversation
        from app.chat.rows import insert_message

        theirs = create_conversation(session, other_id).id
        insert_message(session, theirs, role="user", kind="user", content="Private")
        insert_message(session, theirs, role="assistant", kind="host", content="Secret")
        session.commit()
    before = snapshot(app)

    cases = [
        (theirs, {"regenerate": 2}, None),
        (theirs, {"edit": {"sequence": 1, "message": "x"}}, None),
        (theirs, None, 1),
        (chat_id, {"regenerate": 99}, None),  # no such row
        (chat_id, {"regenerate": 1}, None),  # the person's row, not the host's
        (chat_id, {"edit": {"sequence": 2, "message": "x"}}, None),  # the host's row
        (chat_id, {"edit": {"sequence": 99, "message": "x"}}, None),
        (chat_id, None, 99),
    ]
    for target, body, sequence in cases:
        response = (
            _loop(chat, target, body) if body is not None else _put_branch(chat, target, sequence)
        )
        assert response.status_code == 404, (target, body, sequence, response.get_json())
        assert response.get_json()["error"]["code"] == "NOT_FOUND"
    assert snapshot(app) == before


@pytest.mark.parametrize(
    "body",
    [
        {"regenerate": "2"},
        {"regenerate": True},
        {"regenerate": 0},
        {"regenerate": -1},
        {"regenerate": None},
        {"edit": "hello"},
        {"edit": {"sequence": 1}},
        {"edit": {"message": "x"}},
        {"edit": {"sequence": 1, "message": ""}},
        {"edit": {"sequence": 1, "message": "   "}},
        {"edit": {"sequence": 1, "message": 5}},
        {"edit": {"sequence": "1", "message": "x"}},
        {"edit": {"sequence": 1, "message": "x", "extra": 1}},
        {"regenerate": 2, "message": "x"},
        {"edit": {"sequence": 1, "message": "x"}, "regenerate": 2},
    ],
)
def test_bad_loop_bodies_are_400_and_write_nothing(app, chat, fake_model, body):
    fake_model.script("Hello.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    before = snapshot(app)

    response = _loop(chat, chat_id, body)

    assert response.status_code == 400, response.get_json()
    assert set(response.get_json()["error"]) <= {"code", "message", "field"}  # field: at fault
    assert snapshot(app) == before


@pytest.mark.parametrize(
    "body",
    [{}, {"sequence": "2"}, {"sequence": True}, {"sequence": 0}, {"sequence": 2, "x": 1}, []],
)
def test_bad_branch_bodies_are_400_and_write_nothing(app, chat, fake_model, body):
    fake_model.script("Hello.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    before = snapshot(app)

    response = chat.client.put(
        f"/api/chats/{chat_id}/branch", json=body, headers=chat.auth.headers()
    )

    assert response.status_code == 400, response.get_json()
    assert set(response.get_json()["error"]) <= {"code", "message", "field"}  # field: at fault
    assert snapshot(app) == before


def test_an_edit_longer_than_allowed_is_413(app, chat, fake_model):
    fake_model.script("Hello.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    too_long = "x" * (app.config["LOOPDESK"].max_message_chars + 1)
    response = _loop(chat, chat_id, {"edit": {"sequence": 1, "message": too_long}})
    assert response.status_code == 413


def test_branch_route_needs_csrf_from_a_browser(app, chat, fake_model):
    fake_model.script("Hello.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    response = chat.client.put(f"/api/chats/{chat_id}/branch", json={"sequence": 1})
    assert response.status_code in (400, 403)


def test_a_summary_is_kept_along_its_branch_and_dropped_when_it_is_left(app, chat, fake_model):
    fake_model.script("A1.", "A2.", "A3.", "A2 again.")
    chat_id = chat.new_chat()
    for message in ("Q1", "Q2", "Q3"):
        chat.wait(chat.send(chat_id, message))
    database = app.extensions["database"]

    def summarize(up_to):
        with database.session() as session:
            session.execute(
                update(Conversation)
                .where(Conversation.id == chat_id)
                .values(summary="Earlier: Q1 and A1.", summarized_up_to_sequence=up_to)
            )
            session.commit()

    def summary():
        with database.session() as session:
            conversation = session.get(Conversation, chat_id)
            return conversation.summary, conversation.summarized_up_to_sequence

    summarize(2)
    # A fork after the summarized rows keeps the summary, and the model gets the branch
    # after it.
    chat.wait(_run_of(_loop(chat, chat_id, {"regenerate": 4})))
    assert summary() == ("Earlier: Q1 and A1.", 2)
    assert _texts(fake_model.requests[3]) == [("user", "Q2")]
    assert "Earlier: Q1 and A1." in json.dumps(fake_model.requests[3]["system"])
    # Choosing a branch without the summarized rows drops it.
    summarize(7)  # the regenerated answer, not on the old branch
    assert _put_branch(chat, chat_id, 4).status_code == 200
    assert summary() == (None, 0)


def _frame_of(ws, kind, timeout=10.0):
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        raw = ws.receive(timeout=0.5)
        if raw is not None and json.loads(raw)["type"] == kind:
            return json.loads(raw)
    raise TimeoutError(kind)


def _socket(server, chat_id, token, html=False):
    from tests.live import connect_socket

    query = "" if html else "?format=json"
    return connect_socket(
        f"{server.ws_url}/ws/chats/{chat_id}{query}",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_json_socket_follows_a_branch_switch_with_the_shown_branch(
    app, chat, fake_model, script_client
):
    from tests.live import LiveServer, wait_subscribed

    fake_model.script("First.", "Second.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    chat.wait(_run_of(_loop(chat, chat_id, {"regenerate": 2})))
    token = script_client.environ_base["HTTP_AUTHORIZATION"].split()[1]
    server = LiveServer(app).start()
    ws = _socket(server, chat_id, token)
    try:
        wait_subscribed(app, chat_id)
        assert _put_branch(chat, chat_id, 2).status_code == 200
        frame = _frame_of(ws, "branch")
        # A client that asks for rows after a sequence gets the shown branch's.
        ws.send(json.dumps({"after": 1}))
        caught_up = _frame_of(ws, "message")
    finally:
        ws.close()
        server.stop()
    assert _shown(frame["messages"]) == [(1, "user", "Hi"), (2, "host", "First.")]
    assert frame["leaf"] == 2 and frame["version"] != "0"
    assert caught_up["row"]["sequence"] == 2 and caught_up["row"]["siblings"] == [2, 3]


def test_a_page_that_missed_a_switch_gets_the_whole_branch_when_it_reconnects(
    app, chat, fake_model, script_client
):
    from tests.live import LiveServer

    fake_model.script("First.", "Second.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert 'data-branch="0"' in page
    chat.wait(_run_of(_loop(chat, chat_id, {"regenerate": 2})))
    token = script_client.environ_base["HTTP_AUTHORIZATION"].split()[1]
    server = LiveServer(app).start()
    ws = _socket(server, chat_id, token, html=True)
    try:
        # It held rows up to 2 of the branch it showed then.
        ws.send(json.dumps({"after": 2, "branch": "0"}))
        html = ws.receive(timeout=5)
    finally:
        ws.close()
        server.stop()
    assert 'hx-swap-oob="innerHTML:#rows"' in html
    assert 'id="m-1"' in html and 'id="m-3"' in html and 'id="m-2"' not in html
    assert "2/2" in html and 'id="branch-state"' in html


def test_a_regenerate_stopped_before_it_wrote_anything_shows_the_old_answer_again(
    app, chat, fake_model
):
    fake_model.script("First answer.", Turn(text("never seen"), delay_first=5))
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    run_id = _run_of(_loop(chat, chat_id, {"regenerate": 2}))
    fake_model.wait_for_requests(2)
    assert _shown(chat.rows(chat_id)) == [(1, "user", "Hi")]  # the answer is being rewritten

    chat.client.post(f"/api/chats/{chat_id}/stop", headers=chat.auth.headers())
    assert chat.wait(run_id)["status"] == "cancelled"

    eventually(lambda: len(chat.rows(chat_id)) >= 2, 5, "the first answer was not restored")
    assert _shown(chat.rows(chat_id)) == [(1, "user", "Hi"), (2, "host", "First answer.")]


def test_the_history_of_a_long_branched_chat_is_the_newest_of_the_shown_branch(app, chat):
    """The model reads the newest rows along the shown branch, however the rows of other
    branches interleave with them (newer ones included), and nothing above the summary."""
    from app.chat.branches import Tree, show_branch
    from app.chat.history import load_tail
    from app.chat.rows import insert_message

    chat_id = chat.new_chat()
    database = app.extensions["database"]

    def write(session, count):
        for _ in range(count):
            insert_message(session, chat_id, role="user", kind="user", content="x")

    def show(session, leaf):
        conversation = session.get(Conversation, chat_id)
        show_branch(session, conversation, Tree.load(session, chat_id), leaf)

    def tail(summarized=0):
        with database.session() as session:
            conversation = session.get(Conversation, chat_id)
            conversation.summarized_up_to_sequence = summarized
            return [row.sequence for row in load_tail(session, conversation, cap=1)]

    with database.session() as session:
        write(session, 20)  # 1..20
        show(session, 4)
        write(session, 6)  # 21..26, an alternative after 4
        show(session, 20)  # back to the older branch: its rows are all older
        write(session, 1)  # 27, after 20
        session.commit()
    # cap=1 reads 13 rows (history.ROWS_PER_MESSAGE): the newest 13 of the path 1..20, 27.
    assert tail() == [*range(9, 21), 27]
    assert tail(summarized=15) == [16, 17, 18, 19, 20, 27]
    assert tail(summarized=27) == []

    with database.session() as session:
        show(session, 24)  # a regenerate of 25: the leaf is older than the last row
        session.commit()
    assert tail() == [1, 2, 3, 4, 21, 22, 23, 24]
    assert tail(summarized=22) == [23, 24]
    with database.session() as session:
        show(session, None)  # the first message edited: nothing before the new version
        session.commit()
    assert tail() == []
