"""The scheduler sends a due scheduled message as the person's own, through the same run
machinery (the fake model answers it); a tick is sent once even with two schedulers
racing; a tick due while a reply is being written waits for the next pass; a tick missed
during downtime is sent once and the next computed from now. The clock is injected."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from sqlalchemy import func, select, update

from app.accounts.models import User
from app.chat.models import Conversation, ConversationStatus, Message, Run, RunStatus
from app.chat.schedule_models import ChatSchedule
from app.chat.scheduler import Scheduler, SchedulerParts, run_due
from app.cli.scheduler import scheduler_parts
from app.db import utcnow
from tests.factories import add_offer, set_allowance
from tests.fake_model import Turn, text, tool_use

# A Wednesday, 08:59:30 UTC: the clock every test here reads.
NOW = datetime(2026, 12, 9, 8, 59, 30)


class RecordingExecutor:
    """Takes runs and executes none: for the tests about claims alone."""

    def __init__(self) -> None:
        self.submitted: list[int] = []
        self._lock = threading.Lock()

    def submit(self, run_id: int) -> None:
        with self._lock:
            self.submitted.append(run_id)

    def shutdown(self) -> None:
        pass


def _schedule(app, chat, cron="0 9 * * *", message="Morning digest", tz="UTC") -> tuple[int, int]:
    chat_id = chat.new_chat()
    made = chat.post(
        f"/api/chats/{chat_id}/schedules", {"cron": cron, "message": message, "timezone": tz}
    )
    assert made.status_code == 201, made.get_json()
    return chat_id, made.get_json()["id"]


def _due_at(app, schedule_id: int, when: datetime) -> None:
    with app.extensions["database"].session() as session:
        session.execute(
            update(ChatSchedule).where(ChatSchedule.id == schedule_id).values(next_run_at=when)
        )
        session.commit()


def _schedule_row(app, schedule_id: int) -> ChatSchedule:
    with app.extensions["database"].session() as session:
        return session.get_one(ChatSchedule, schedule_id)


def _runs(app, chat_id: int) -> list[Run]:
    with app.extensions["database"].session() as session:
        return list(session.scalars(select(Run).where(Run.conversation_id == chat_id)))


def _recording(app) -> tuple[SchedulerParts, RecordingExecutor]:
    executor = RecordingExecutor()
    services = app.extensions["services"]
    return SchedulerParts(services.database, services.hub, executor, services.settings), executor


def test_a_due_message_starts_a_run_and_its_rows_show(app, chat, fake_model):
    fake_model.script("Here is your morning digest.")
    chat_id, sid = _schedule(app, chat, tz="Europe/Berlin", cron="0 10 * * *")
    _due_at(app, sid, NOW - timedelta(seconds=30))
    seen = Scheduler(scheduler_parts(app), clock=lambda: NOW)  # never started: one pass

    report = seen.pass_once()

    assert len(report.sent) == 1 and report.waiting == report.skipped == []
    run = chat.wait(report.sent[0])
    assert run["status"] == "completed"
    rows = chat.rows(chat_id)
    assert [(r["kind"], r["content"]) for r in rows] == [
        ("user", "Morning digest"),
        ("host", "Here is your morning digest."),
    ]
    assert fake_model.requests[-1]["messages"][-1]["content"][0]["text"] == "Morning digest"
    assert _runs(app, chat_id)[0].trigger == "schedule"
    # The next tick: 10:00 in Berlin (09:00 UTC in winter), computed from now.
    after = _schedule_row(app, sid)
    assert after.next_run_at == datetime(2026, 12, 9, 9, 0)
    assert after.last_run_at == NOW and after.last_error is None
    # Nothing is due any more: a second pass at the same moment sends nothing.
    assert seen.pass_once().sent == []


def test_a_scheduled_run_that_asks_waits_for_the_person(app, chat, fake_model):
    fake_model.script(
        Turn(
            text("Which one?"), tool_use("select_offer", {"prompt": "Which offer?"}, id="toolu_s")
        ),
    )
    add_offer(app, chat.user_id, "Calm Mornings")
    chat_id, sid = _schedule(app, chat)
    _due_at(app, sid, NOW)
    run_id = run_due(scheduler_parts(app), NOW).sent[0]
    assert chat.wait(run_id)["status"] == "awaiting"
    card = chat.rows(chat_id)[-1]
    assert card["kind"] == "card" and card["card"]["status"] == "awaiting"

    fake_model.script("Noted, no offer then.")
    answered = chat.answer(chat_id, "toolu_s", {"dismissed": True})
    assert answered.status_code == 202
    assert chat.wait(answered.get_json()["runId"])["status"] == "completed"


def test_a_tick_waits_while_a_reply_is_being_written_and_is_sent_after(app, chat):
    chat_id, sid = _schedule(app, chat)
    _due_at(app, sid, NOW)
    with app.extensions["database"].session() as session:
        busy = Run(conversation_id=chat_id, user_id=chat.user_id, status=RunStatus.RUNNING)
        session.add(busy)
        session.flush()
        session.execute(
            update(Conversation)
            .where(Conversation.id == chat_id)
            .values(status=ConversationStatus.STREAMING, active_run_id=busy.id)
        )
        busy_id = busy.id
        session.commit()
    parts, executor = _recording(app)

    waiting = run_due(parts, NOW)
    assert waiting.waiting == [sid] and waiting.sent == [] and executor.submitted == []
    assert _schedule_row(app, sid).next_run_at == NOW  # still due: not lost
    assert len(_runs(app, chat_id)) == 1

    with app.extensions["database"].session() as session:
        session.execute(update(Run).where(Run.id == busy_id).values(status=RunStatus.COMPLETED))
        session.execute(
            update(Conversation)
            .where(Conversation.id == chat_id)
            .values(status=ConversationStatus.IDLE, active_run_id=None)
        )
        session.commit()
    later = NOW + timedelta(seconds=15)
    sent = run_due(parts, later)
    assert len(sent.sent) == 1 and executor.submitted == sent.sent
    assert _schedule_row(app, sid).next_run_at == datetime(2026, 12, 9, 9, 0)


def test_ticks_missed_during_downtime_are_sent_once_then_from_now(app, chat):
    chat_id, sid = _schedule(app, chat, cron="*/5 * * * *")
    # Down for three days: hundreds of ticks of five minutes went by unsent.
    _due_at(app, sid, NOW - timedelta(days=3))
    parts, executor = _recording(app)

    first = run_due(parts, NOW)
    again = run_due(parts, NOW + timedelta(seconds=20))

    assert len(first.sent) == 1 and again.sent == []
    assert len(_runs(app, chat_id)) == 1
    assert _schedule_row(app, sid).next_run_at == datetime(2026, 12, 9, 9, 0)


def test_two_schedulers_racing_send_each_tick_once(app, chat):
    """Two schedulers (threads with their own sessions, as two processes would be) pass
    over the same due ticks at the same moment, many times."""
    # Three chats: the most replies one person may have in flight (MAX_CONCURRENT_RUNS).
    ticks = [_schedule(app, chat, message=f"Tick {n}") for n in range(3)]
    parts, executor = _recording(app)
    for _round in range(3):
        for _chat_id, sid in ticks:
            _due_at(app, sid, NOW)
        with app.extensions["database"].session() as session:  # each chat idle again
            session.execute(update(Run).values(status=RunStatus.COMPLETED))
            session.execute(
                update(Conversation).values(status=ConversationStatus.IDLE, active_run_id=None)
            )
            session.commit()
        start = threading.Barrier(2)
        reports = []

        def scheduler(start: threading.Barrier, reports: list) -> None:
            start.wait()
            reports.append(run_due(parts, NOW))

        threads = [threading.Thread(target=scheduler, args=(start, reports)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        sent = [run for report in reports for run in report.sent]
        assert len(sent) == len(ticks), reports
    for chat_id, _sid in ticks:
        assert len(_runs(app, chat_id)) == 3
    with app.extensions["database"].session() as session:
        messages = session.scalar(select(func.count(Message.id)).where(Message.kind == "user"))
    assert messages == 3 * len(ticks)
    assert sorted(executor.submitted) == sorted(set(executor.submitted))


def test_a_paused_schedule_sends_nothing_and_resumes_from_now(app, chat):
    chat_id, sid = _schedule(app, chat)
    _due_at(app, sid, NOW - timedelta(hours=1))
    url = f"/api/chats/{chat_id}/schedules/{sid}"
    headers = chat.auth.headers()
    assert chat.client.patch(url, json={"paused": True}, headers=headers).status_code == 200
    parts, executor = _recording(app)
    assert run_due(parts, NOW).sent == [] and executor.submitted == []

    # Resumed, the tick missed while paused is not sent: the next is after now.
    assert chat.client.patch(url, json={"paused": False}, headers=headers).status_code == 200
    assert _schedule_row(app, sid).next_run_at > utcnow()


def test_a_tick_refused_for_the_allowance_passes_saying_why(app, chat):
    chat_id, sid = _schedule(app, chat)
    _due_at(app, sid, NOW)
    set_allowance(app, chat.user_id, 0)
    parts, executor = _recording(app)

    report = run_due(parts, NOW)

    assert report.skipped == [sid] and executor.submitted == []
    row = _schedule_row(app, sid)
    assert row.next_run_at == datetime(2026, 12, 9, 9, 0) and "allowance" in row.last_error
    assert _runs(app, chat_id) == []
    listed = chat.client.get(f"/api/chats/{chat_id}/schedules").get_json()["schedules"]
    assert "allowance" in listed[0]["last_error"]


def test_a_tick_for_an_unconfirmed_address_passes_saying_why(app, chat):
    """VERIFY_EMAIL turned on after the schedule was made: nothing is sent for an address
    not yet confirmed, as nothing is when they type."""
    chat_id, sid = _schedule(app, chat)
    _due_at(app, sid, NOW)
    with app.extensions["database"].session() as session:
        session.execute(update(User).values(email_verified_at=None))
        session.commit()
    parts, executor = _recording(app)
    strict = SchedulerParts(
        parts.database,
        parts.hub,
        executor,
        parts.settings.model_copy(update={"verify_email": True}),
    )

    report = run_due(strict, NOW)

    assert report.skipped == [sid] and executor.submitted == [] and _runs(app, chat_id) == []
    assert "Confirm your email address" in _schedule_row(app, sid).last_error


def test_flask_scheduler_once_sends_what_is_due(app, chat, fake_model, runner):
    fake_model.script("Done on schedule.")
    chat_id, sid = _schedule(app, chat)
    _due_at(app, sid, datetime(2020, 1, 1))

    result = runner.invoke(args=["scheduler", "--once"])

    assert result.exit_code == 0, result.output
    assert "1 sent, 0 waiting for a reply to end, 0 skipped." in result.output
    # --once hands its runs over and waits for the thread executor: the answer is in.
    assert [r["kind"] for r in chat.rows(chat_id)] == ["user", "host"]
    assert _runs(app, chat_id)[0].status == RunStatus.COMPLETED


def test_a_chat_no_longer_the_persons_sends_nothing_and_a_deleted_one_takes_its_schedules(
    app, chat
):
    from app.accounts.project_models import ProjectMember
    from app.accounts.projects import create_project
    from app.chat.scheduler import NOT_YOURS
    from tests.factories import add_user

    owner = add_user(app, "owner@example.com")
    with app.extensions["database"].session() as session:
        team = create_project(session, owner, "Team")
        session.add(ProjectMember(project_id=team.id, user_id=chat.user_id, role="editor"))
        team_id = team.id
        session.commit()
    made = chat.post("/api/chats", {"project_id": team_id})
    team_chat = made.get_json()["id"]
    sid = chat.post(
        f"/api/chats/{team_chat}/schedules", {"cron": "0 9 * * *", "message": "Team digest"}
    ).get_json()["id"]
    _due_at(app, sid, NOW)
    with app.extensions["database"].session() as session:  # Ada leaves the team
        session.execute(
            ProjectMember.__table__.delete()
            .where(ProjectMember.user_id == chat.user_id)
            .where(ProjectMember.project_id == team_id)
        )
        session.commit()
    parts, executor = _recording(app)

    assert run_due(parts, NOW).skipped == [sid] and executor.submitted == []
    assert _schedule_row(app, sid).last_error == NOT_YOURS
    assert _runs(app, team_chat) == []

    chat_id, mine = _schedule(app, chat)
    deleted = chat.post("/api/chats/bulk", {"ids": [chat_id], "action": "delete"})
    assert deleted.status_code == 200
    with app.extensions["database"].session() as session:
        assert session.get(ChatSchedule, mine) is None


def test_a_chat_is_sent_at_most_one_scheduled_message_a_minute(app, chat):
    chat_id, daily = _schedule(app, chat)
    weekly = chat.post(
        f"/api/chats/{chat_id}/schedules",
        {"cron": "0 9 * * 3", "message": "Weekly review", "timezone": "UTC"},
    ).get_json()["id"]
    for sid in (daily, weekly):
        _due_at(app, sid, NOW)
    parts, executor = _recording(app)

    first = run_due(parts, NOW)
    assert len(first.sent) == 1 and first.waiting == [weekly]  # its reply is being written
    with app.extensions["database"].session() as session:  # the reply ends within the minute
        session.execute(update(Run).values(status=RunStatus.COMPLETED))
        session.execute(
            update(Conversation)
            .where(Conversation.id == chat_id)
            .values(status=ConversationStatus.IDLE, active_run_id=None)
        )
        session.commit()
    same_minute = run_due(parts, NOW + timedelta(seconds=20))
    next_minute = run_due(parts, NOW + timedelta(seconds=35))

    assert same_minute.sent == [] and same_minute.waiting == [weekly]
    assert len(next_minute.sent) == 1 and executor.submitted == first.sent + next_minute.sent
    assert _schedule_row(app, weekly).next_run_at > NOW + timedelta(days=1)
