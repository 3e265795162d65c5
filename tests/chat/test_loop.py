"""The host loop end to end: the JSON API, a run in the thread executor, the real SDK,
and the strict fake model server."""

from __future__ import annotations

import json
import threading
import time

from sqlalchemy import select

from app.chat.models import Conversation, Message, Run
from app.events import TextDelta
from tests.fake_model import Turn, api_error, stream_error, text, thinking, tool_use
from tests.waiting import eventually


def _hidden_rows(app, chat_id):
    with app.extensions["database"].session() as session:
        return session.scalars(
            select(Message).where(Message.conversation_id == chat_id).order_by(Message.sequence)
        ).all()


def test_plain_question_streams_and_persists_rows_in_order(app, chat, fake_model):
    fake_model.script(Turn(text("Hello! Your offers look great today.")))
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id)

    run = chat.wait(chat.send(chat_id, "Hi there"))

    assert run["status"] == "completed"
    rows = chat.rows(chat_id)
    assert [(r["sequence"], r["kind"], r["content"]) for r in rows] == [
        (1, "user", "Hi there"),
        (2, "host", "Hello! Your offers look great today."),
    ]
    events = []
    while (event := subscription.get(timeout=0.01)) is not None:
        events.append(event)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1, "text arrives in several deltas"
    assert "".join(deltas) == "Hello! Your offers look great today."
    assert events[-1].kind == "done"
    request = fake_model.requests[0]
    assert request["tool_choice"] == {"type": "auto"}
    assert request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi there"}]}
    ]
    assert {t["name"] for t in request["tools"]} >= {"list_offers", "select_offer", "quiz"}
    assert fake_model.rejections == []


def test_conversation_gets_a_title_from_the_first_message(app, chat, fake_model):
    fake_model.script("Sure.")
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Write a quiz for my coffee subscription"))
    chats = chat.client.get("/api/chats").get_json()["chats"]
    assert chats[0]["title"] == "Write a quiz for my coffee subscription"
    assert chats[0]["status"] == "IDLE"


def test_model_that_calls_tools_forever_gets_a_wrap_up_call(app, chat, fake_model):
    max_iterations = app.config["LOOPDESK"].max_iterations

    def always_a_tool(body):
        if body.get("tool_choice", {}).get("type") == "none":
            return Turn(text("I looked through your offers; here is where things stand."))
        return Turn(tool_use("list_offers", {}))

    fake_model.responder = always_a_tool
    chat_id = chat.new_chat()

    run = chat.wait(chat.send(chat_id, "Loop please"))

    assert run["status"] == "completed"
    choices = [r["tool_choice"]["type"] for r in fake_model.requests]
    assert choices == ["auto"] * max_iterations + ["none"]
    assert run["iterations"] == max_iterations + 1
    assert chat.rows(chat_id)[-1]["content"] == (
        "I looked through your offers; here is where things stand."
    )
    assert fake_model.rejections == []


def test_overloaded_then_success_is_retried(app, chat, fake_model):
    fake_model.script(api_error(529, "overloaded_error", retry_after=0.01), "Back again.")
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "Hello"))
    assert run["status"] == "completed"
    assert chat.rows(chat_id)[-1]["content"] == "Back again."
    assert len(fake_model.requests) == 2


def test_mid_stream_overload_is_retried(app, chat, fake_model):
    fake_model.script(Turn(text("Half an "), stream_error("overloaded_error")), "Whole answer.")
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "Hello"))
    assert run["status"] == "completed"
    assert chat.rows(chat_id)[-1]["content"] == "Whole answer."


def test_persistent_errors_end_the_run_with_a_visible_row_and_the_chat_stays_usable(
    app, chat, fake_model
):
    fake_model.script(*[api_error(529, "overloaded_error", retry_after=0.01)] * 4)
    chat_id = chat.new_chat()

    run = chat.wait(chat.send(chat_id, "Hello"))

    assert run["status"] == "error"
    last = chat.rows(chat_id)[-1]
    assert last["kind"] == "error"
    assert "busy" in last["content"]
    fake_model.script("Now I can answer.")
    run = chat.wait(chat.send(chat_id, "Try again"))
    assert run["status"] == "completed"
    assert chat.rows(chat_id)[-1]["content"] == "Now I can answer."


def test_a_second_message_while_a_run_is_in_flight_is_409(app, chat, fake_model):
    fake_model.script(Turn(text("slow answer"), delay_first=1.0))
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "first")

    response = chat.post(f"/api/chats/{chat_id}/loop", {"message": "second"})

    assert response.status_code == 409
    assert response.get_json()["error"]["code"] == "RUN_IN_FLIGHT"
    chat.wait(run_id)
    assert [r["content"] for r in chat.rows(chat_id) if r["kind"] == "user"] == ["first"]


def test_stop_cancels_the_run_and_keeps_what_was_persisted(app, chat, fake_model):
    fake_model.script(Turn(text("a long answer " * 50), token_delay=0.05))
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Tell me everything")
    fake_model.wait_for_requests(1)

    response = chat.post(f"/api/chats/{chat_id}/stop", {})

    assert response.status_code == 200 and response.get_json()["stopped"] is True
    assert chat.wait(run_id)["status"] == "cancelled"
    # What was shown is kept, marked stopped (tests/chat/test_stop.py has the details).
    rows = chat.rows(chat_id)
    assert [r["kind"] for r in rows][0] == "user" and len(rows) == 2
    assert rows[1]["stopped"] is True and rows[1]["kind"] in ("host", "notice")
    fake_model.script("Fresh start.")
    assert chat.wait(chat.send(chat_id, "Short version?"))["status"] == "completed"


def test_repair_after_a_crash_between_tool_use_and_its_result(app, chat, fake_model):
    chat_id = chat.new_chat()
    fake_model.script("First answer.")
    chat.wait(chat.send(chat_id, "hello"))
    # A crash: the assistant turn with a tool_use was persisted, its result never was.
    from app.chat.rows import insert_message

    with app.extensions["database"].session() as session:
        insert_message(
            session,
            chat_id,
            role="assistant",
            kind="host",
            content="Let me check.",
            meta={
                "blocks": [
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_crashed", "name": "list_offers", "input": {}},
                ]
            },
        )
        session.commit()
    fake_model.script("Sorry about that, where were we?")

    run = chat.wait(chat.send(chat_id, "are you there?"))

    assert run["status"] == "completed"
    assert fake_model.rejections == []
    sent = fake_model.requests[-1]["messages"]
    assert sent[-2]["content"][-1]["id"] == "toolu_crashed"
    repaired = sent[-1]["content"]
    assert repaired[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_crashed",
        "content": json.dumps({"dismissed": True}),
    }
    assert repaired[1] == {"type": "text", "text": "are you there?"}


def test_an_unknown_tool_and_bad_tool_input_become_error_results(app, chat, fake_model):
    fake_model.script(
        Turn(tool_use("launch_rocket", {}), tool_use("get_offer", {"offer_id": "seven"})),
        "Those did not work.",
    )
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "go"))
    assert run["status"] == "completed"
    results = fake_model.requests[1]["messages"][-1]["content"]
    assert [r["is_error"] for r in results] == [True, True]
    assert "no tool named launch_rocket" in results[0]["content"]
    assert "offer_id" in results[1]["content"]


def test_thinking_blocks_are_sent_back_with_their_signatures(make_app, fake_model, auth):
    from tests.factories import ChatDriver

    app = make_app(anthropic_base_url=fake_model.base_url, thinking_budget=2048)
    client = app.test_client()
    auth.app, auth.client = app, client
    auth.create()
    auth.login()
    driver = ChatDriver(app, client, auth)
    fake_model.script(
        Turn(thinking("They want offers."), tool_use("list_offers", {})),
        Turn(thinking("None yet."), text("You have no offers yet.")),
    )
    chat_id = driver.new_chat()

    run = driver.wait(driver.send(chat_id, "What do I sell?"))

    assert run["status"] == "completed", run
    assert fake_model.rejections == []
    first, second = fake_model.requests
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] > 2048
    assistant = second["messages"][-2]
    assert assistant["content"][0]["type"] == "thinking"
    assert assistant["content"][0]["signature"] in fake_model.issued_signatures


def test_one_run_per_conversation_is_enforced_by_the_database(app, chat):
    from sqlalchemy.exc import IntegrityError

    chat_id = chat.new_chat()
    with app.extensions["database"].session() as session:
        conversation = session.get(Conversation, chat_id)
        session.add(Run(conversation_id=chat_id, user_id=conversation.user_id, status="queued"))
        session.commit()
        session.add(Run(conversation_id=chat_id, user_id=conversation.user_id, status="running"))
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
        else:
            raise AssertionError("a second active run was accepted")


def test_a_run_that_slips_past_the_check_is_refused_and_nothing_is_kept(app, chat):
    """The database's one-active-run index is the backstop behind the locked check: a
    second run is refused as a conflict and the caller's rollback keeps nothing of it."""
    from app.chat.runs import RunConflict, start_run

    chat_id = chat.new_chat()
    database = app.extensions["database"]
    with database.session() as session:
        conversation = session.get(Conversation, chat_id)
        session.add(Run(conversation_id=chat_id, user_id=conversation.user_id, status="running"))
        session.commit()
    with database.session() as session:
        conversation = session.get(Conversation, chat_id)
        conversation.title = "changed in the refused turn"
        try:
            start_run(session, conversation, "message")
        except RunConflict:
            session.rollback()
        else:
            raise AssertionError("a second active run was started")
    with database.session() as session:
        assert session.get(Conversation, chat_id).title != "changed in the refused turn"
        runs = session.scalars(select(Run).where(Run.conversation_id == chat_id)).all()
        assert [run.status for run in runs] == ["running"]


def test_concurrent_messages_start_exactly_one_run(app, chat, fake_model):
    fake_model.script(Turn(text("only once"), delay_first=0.5))
    chat_id = chat.new_chat()
    statuses = []

    def send():
        client = app.test_client()
        with client.session_transaction() as flask_session:
            flask_session.update(dict(chat.client.session_transaction().__enter__()))
        statuses.append(None)

    # Each thread uses the same logged-in session cookie.
    cookie = chat.client.get_cookie("session")
    results = []

    def post():
        client = app.test_client()
        client.set_cookie("session", cookie.value)
        response = client.post(
            f"/api/chats/{chat_id}/loop", json={"message": "hi"}, headers=chat.auth.headers()
        )
        results.append(response.status_code)

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == [202, 409, 409, 409]
    with app.extensions["database"].session() as session:
        assert len(session.scalars(select(Run).where(Run.conversation_id == chat_id)).all()) == 1


def test_a_connection_dropped_mid_stream_ends_the_run_with_a_clear_error(app, chat, fake_model):
    fake_model.script(Turn(text("one two three four five six"), stall_after=2, stall_seconds=20))
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "hello")
    hub = app.extensions["services"].hub
    eventually(lambda: hub.live_state(chat_id).text, 5, "the answer never began to stream")

    fake_model.stop()  # the model's server goes away mid-answer

    run = chat.wait(run_id)
    assert run["status"] == "error"
    last = chat.rows(chat_id)[-1]
    assert last["kind"] == "error" and "Could not reach the model" in last["content"]


def _delete_from_the_page(chat, chat_id):
    """The Delete button of the chat being viewed."""
    response = chat.client.post(
        f"/chats/{chat_id}/delete",
        headers={
            **chat.auth.headers(),
            "HX-Request": "true",
            "HX-Current-URL": f"http://localhost/chats/{chat_id}",
        },
    )
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == "/"


def _assert_ended_cleanly(app, chat, run_id, future, caplog, deleted_id, kept_id):
    """The run's thread ended without raising, its bookkeeping is gone, nothing was logged
    as an error, and the person's list no longer has the chat."""
    import logging

    services = app.extensions["services"]
    assert future.result(timeout=5) in ("cancelled", "completed")
    assert run_id not in services.liveness._runs
    assert run_id not in services.cancellations
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    assert chat.client.get(f"/api/runs/{run_id}").status_code == 404
    assert [c["id"] for c in chat.client.get("/api/chats").get_json()["chats"]] == [kept_id]
    page = chat.client.get("/", follow_redirects=True).get_data(as_text=True)
    assert f'id="conv-{kept_id}"' in page and f'id="conv-{deleted_id}"' not in page


def test_deleting_a_chat_while_it_answers_cancels_the_run_cleanly(app, chat, fake_model, caplog):
    """Delete from the page while the reply streams: the stream is cut, the run cleaned
    up (no error logged, no liveness watch or cancellation left), the list drops the
    chat."""
    fake_model.script(Turn(text("a long answer " * 80), token_delay=0.05))
    kept_id = chat.new_chat()
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Tell me everything")
    fake_model.wait_for_requests(1)
    future = app.extensions["executor"].futures[run_id]
    started = time.monotonic()

    _delete_from_the_page(chat, chat_id)

    assert future.result(timeout=5) == "cancelled"
    assert time.monotonic() - started < 3  # cut, not streamed to its end (about 12 s)
    assert fake_model.replies == []  # the model's answer was never read to its end
    _assert_ended_cleanly(app, chat, run_id, future, caplog, chat_id, kept_id)


def test_deleting_a_chat_between_the_answer_and_its_row_is_a_clean_cancel(
    app, chat, fake_model, caplog
):
    """The delete lands after the model answered and before the run wrote its row: the
    write finds the conversation gone, and that is a cancellation, not a crash."""
    deleted = threading.Event()

    def after_the_delete(body):
        assert deleted.wait(10)
        return Turn(text("Here you go."))

    fake_model.responder = after_the_delete
    kept_id = chat.new_chat()
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Quick one")
    fake_model.wait_for_requests(1)
    future = app.extensions["executor"].futures[run_id]

    _delete_from_the_page(chat, chat_id)
    deleted.set()

    _assert_ended_cleanly(app, chat, run_id, future, caplog, chat_id, kept_id)
    assert fake_model.replies, "the model did answer"


def test_a_chat_deleted_by_another_process_cancels_the_run_here(app, chat, fake_model, caplog):
    """Another process deleted the chat (its cancellation set is not ours): this process's
    monitor finds the run's row gone and cuts the stream within a few seconds."""
    fake_model.script(Turn(text("a long answer " * 80), token_delay=0.05))
    kept_id = chat.new_chat()
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Tell me everything")
    fake_model.wait_for_requests(1)
    future = app.extensions["executor"].futures[run_id]
    started = time.monotonic()

    with app.extensions["database"].session() as session:
        session.delete(session.get(Conversation, chat_id))
        session.commit()

    assert future.result(timeout=5) == "cancelled"
    assert time.monotonic() - started < 4
    assert fake_model.replies == []
    _assert_ended_cleanly(app, chat, run_id, future, caplog, chat_id, kept_id)


def _run_elsewhere(app, chat_id: int) -> int:
    """A run answering in the chat from another process (a worker): running, and its
    conversation's active run, but not executing here."""
    with app.extensions["database"].session() as session:
        conversation = session.get(Conversation, chat_id)
        run = Run(conversation_id=chat_id, user_id=conversation.user_id, status="running")
        session.add(run)
        session.flush()
        conversation.active_run_id = run.id
        session.commit()
        return run.id


def test_no_run_stays_in_the_cancellation_set_once_it_is_not_executing_here(app, chat, fake_model):
    """The set this process's runs check on every event holds only runs executing here,
    so it does not grow for the life of the process: a liveness poll begun while a run was
    still here does not put it back once it ended, and stopping or deleting a chat whose
    run answers in another process adds nothing here."""
    from app.chat.liveness import StreamWatch

    services = app.extensions["services"]
    fake_model.script("Done.")
    chat_id = chat.new_chat()
    finished = chat.send(chat_id, "hello")
    # The monitor's tick listed the run before it ended; its poll reads after the delete.
    listed = [StreamWatch(finished, chat_id, time.monotonic())]
    assert chat.wait(finished)["status"] == "completed"
    _delete_from_the_page(chat, chat_id)
    services.liveness.poll_cancellations(listed)

    stopped_id, deleted_id = chat.new_chat(), chat.new_chat()
    stopped, deleted = _run_elsewhere(app, stopped_id), _run_elsewhere(app, deleted_id)
    assert chat.post(f"/api/chats/{stopped_id}/stop", {}).get_json()["runId"] == stopped
    _delete_from_the_page(chat, deleted_id)

    assert [r for r in (finished, stopped, deleted) if r in services.cancellations] == []
