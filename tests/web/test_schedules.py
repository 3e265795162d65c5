"""Scheduled messages through the JSON API and the chat page's Schedule panel: adding one
from a phrase or cron in the person's zone, listing, pausing, deleting; bad input refused
with a code and nothing written; another person's chat or schedule is not found."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import func, select

from app.accounts.project_models import ProjectMember
from app.accounts.projects import create_project
from app.chat.schedule_models import ChatSchedule
from tests.factories import add_token, csrf_token_from
from tests.web.helpers import bearer


def _schedules(app) -> int:
    with app.extensions["database"].session() as session:
        return session.scalar(select(func.count(ChatSchedule.id))) or 0


def test_a_phrase_in_the_persons_zone_lists_pauses_resumes_and_deletes(app, chat):
    chat_id = chat.new_chat()
    url = f"/api/chats/{chat_id}/schedules"
    made = chat.post(
        url,
        {"when": "every weekday at 9:00", "message": "What is new?", "timezone": "Europe/Berlin"},
    )
    assert made.status_code == 201, made.get_json()
    schedule = made.get_json()
    assert schedule["cron"] == "0 9 * * 1-5"
    assert schedule["description"] == "At 09:00 on Monday through Friday"
    assert schedule["timezone"] == "Europe/Berlin" and schedule["paused"] is False
    local = datetime.fromisoformat(schedule["next_run_local"])
    assert (local.hour, local.minute, local.weekday() < 5) == (9, 0, True)
    assert local.utcoffset().total_seconds() in (3600, 7200)  # CET or CEST
    utc = datetime.fromisoformat(schedule["next_run_at"].removesuffix("Z"))
    assert utc == local.replace(tzinfo=None) - local.utcoffset()

    listed = chat.client.get(url).get_json()["schedules"]
    assert listed == [schedule]

    one = f"{url}/{schedule['id']}"
    paused = chat.client.patch(one, json={"paused": True}, headers=chat.auth.headers())
    assert paused.status_code == 200
    assert paused.get_json()["paused"] is True and paused.get_json()["next_run_at"] is None
    resumed = chat.client.patch(one, json={"paused": False}, headers=chat.auth.headers())
    assert resumed.get_json()["next_run_local"].endswith(("09:00:00+01:00", "09:00:00+02:00"))

    assert chat.client.delete(one, headers=chat.auth.headers()).status_code == 204
    assert chat.client.get(url).get_json()["schedules"] == []
    assert chat.client.delete(one, headers=chat.auth.headers()).status_code == 404


def test_a_cron_expression_is_kept_single_spaced_with_utc_by_default(app, chat):
    chat_id = chat.new_chat()
    made = chat.post(f"/api/chats/{chat_id}/schedules", {"cron": "30  18 * * *", "message": "Hi"})
    assert made.status_code == 201
    assert made.get_json()["cron"] == "30 18 * * *"
    assert made.get_json()["timezone"] == "UTC"
    assert made.get_json()["next_run_at"].endswith("T18:30:00Z")


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (
            {"cron": "0 9 * * *", "message": "Hi", "timezone": "Mars/Olympus"},
            "UNKNOWN_TIME_ZONE",
            "timezone",
        ),
        (
            {"cron": "0 9 * * *", "message": "Hi", "timezone": "../../etc/passwd"},
            "UNKNOWN_TIME_ZONE",
            "timezone",
        ),
        ({"cron": "0 0 30 2 *", "message": "Hi"}, "INVALID_SCHEDULE", "cron"),
        ({"cron": "* * * * * *", "message": "Hi"}, "INVALID_SCHEDULE", "cron"),
        ({"cron": "61 * * * *", "message": "Hi"}, "INVALID_SCHEDULE", "cron"),
        ({"cron": "@daily", "message": "Hi"}, "INVALID_SCHEDULE", "cron"),
        ({"when": "now and then", "message": "Hi"}, "INVALID_SCHEDULE", "when"),
        ({"when": "every day at 25:00", "message": "Hi"}, "INVALID_SCHEDULE", "when"),
        (
            {"when": "every day at 9:00", "cron": "0 9 * * *", "message": "Hi"},
            "INVALID_SCHEDULE",
            "when",
        ),
        ({"message": "Hi"}, "INVALID_SCHEDULE", "cron"),
        ({"cron": "0 9 * * *", "message": "   "}, "INVALID_FIELD", "message"),
        ({"cron": "0 9 * * *"}, "INVALID_FIELD", "message"),
        ({"cron": "0 9 * * *", "message": "Hi", "every": 5}, "INVALID_FIELD", "every"),
    ],
)
def test_bad_input_is_refused_with_a_code_and_nothing_is_written(app, chat, body, code, field):
    chat_id = chat.new_chat()
    refused = chat.post(f"/api/chats/{chat_id}/schedules", body)
    assert refused.status_code == 400, refused.get_json()
    error = refused.get_json()["error"]
    assert (error["code"], error.get("field")) == (code, field)
    assert error["message"]
    assert _schedules(app) == 0


def test_a_chat_takes_a_few_schedules_and_refuses_more(app, chat):
    chat_id = chat.new_chat()
    url = f"/api/chats/{chat_id}/schedules"
    for minute in range(5):
        assert chat.post(url, {"cron": f"{minute} 9 * * *", "message": "Hi"}).status_code == 201
    refused = chat.post(url, {"cron": "9 9 * * *", "message": "Hi"})
    assert refused.status_code == 400
    assert refused.get_json()["error"]["code"] == "TOO_MANY_SCHEDULES"
    assert _schedules(app) == 5


def test_another_persons_chat_and_schedules_are_not_found(app, client, auth, chat):
    mine = chat.new_chat()
    other = chat.new_chat()
    theirs = chat.post(f"/api/chats/{mine}/schedules", {"cron": "0 9 * * *", "message": "Hi"})
    sid = theirs.get_json()["id"]
    headers = chat.auth.headers()
    # The schedule named under another chat of the same person: not found.
    assert (
        client.patch(
            f"/api/chats/{other}/schedules/{sid}", json={"paused": True}, headers=headers
        ).status_code
        == 404
    )
    assert client.delete(f"/api/chats/{other}/schedules/{sid}", headers=headers).status_code == 404

    auth.logout()
    auth.create("eve@example.com")
    auth.login("eve@example.com")
    eve = auth.headers()
    url = f"/api/chats/{mine}/schedules"
    assert client.get(url).status_code == 404
    assert (
        client.post(url, json={"cron": "0 9 * * *", "message": "x"}, headers=eve).status_code == 404
    )
    assert client.patch(f"{url}/{sid}", json={"paused": True}, headers=eve).status_code == 404
    assert client.delete(f"{url}/{sid}", headers=eve).status_code == 404
    with app.extensions["database"].session() as session:
        kept = session.get(ChatSchedule, sid)
        assert kept is not None and kept.paused is False


def test_a_viewer_schedules_in_their_own_chat_of_a_project(app, client, auth):
    """Scheduling is sending a message later: a project's viewer chats (reading, not
    writing), so they may schedule in their own chat; its runs write nothing, as theirs."""
    owner = auth.create("owner@example.com")
    viewer = auth.create("viewer@example.com")
    with app.extensions["database"].session() as session:
        project = create_project(session, owner, "Team")
        session.add(ProjectMember(project_id=project.id, user_id=viewer, role="viewer"))
        project_id = project.id
        session.commit()
    auth.login("viewer@example.com")
    chat_id = client.post(
        "/api/chats", json={"project_id": project_id}, headers=auth.headers()
    ).get_json()["id"]
    made = client.post(
        f"/api/chats/{chat_id}/schedules",
        json={"when": "every monday at 8:00", "message": "Summarize the week"},
        headers=auth.headers(),
    )
    assert made.status_code == 201 and made.get_json()["cron"] == "0 8 * * 1"


def test_a_bearer_token_schedules_too(app, client, auth):
    _, raw = add_token(app, auth.create())
    chat_id = client.post("/api/chats", json={}, headers=bearer(raw)).get_json()["id"]
    made = client.post(
        f"/api/chats/{chat_id}/schedules",
        json={
            "when": "every day at 6pm",
            "message": "Evening notes",
            "timezone": "America/New_York",
        },
        headers=bearer(raw),
    )
    assert made.status_code == 201 and made.get_json()["cron"] == "0 18 * * *"


# -- the Schedule panel (htmx) ------------------------------------------------------------------


def test_the_panel_adds_refuses_pauses_and_deletes_in_place(app, client, auth, chat):
    chat_id = chat.new_chat()
    page = client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert 'id="schedule-menu"' in page and "Nothing scheduled" in page
    token = csrf_token_from(page)
    htmx = {"HX-Request": "true"}
    url = f"/chats/{chat_id}/schedules"

    refused = client.post(
        url,
        data={"when": "sometimes", "message": "Hello", "timezone": "", "csrf_token": token},
        headers=htmx,
    )
    assert refused.status_code == 400
    html = refused.get_data(as_text=True)
    assert html.startswith('<div id="schedule-panel"') and 'role="alert"' in html
    assert 'value="sometimes"' in html and ">Hello</textarea>" in html  # kept as typed

    made = client.post(
        url,
        data={
            "when": "every day at 18:30",
            "message": "Daily digest",
            "timezone": "Asia/Tokyo",
            "csrf_token": token,
        },
        headers=htmx,
    )
    assert made.status_code == 201
    html = made.get_data(as_text=True)
    assert "Daily digest" in html and "At 18:30 every day" in html and "18:30 JST" in html
    sid = chat.client.get(f"/api/chats/{chat_id}/schedules").get_json()["schedules"][0]["id"]

    paused = client.post(
        f"{url}/{sid}/pause", data={"paused": "1", "csrf_token": token}, headers=htmx
    )
    assert "Paused" in paused.get_data(as_text=True) and ">Resume</button>" in paused.get_data(
        as_text=True
    )
    resumed = client.post(
        f"{url}/{sid}/pause", data={"paused": "0", "csrf_token": token}, headers=htmx
    )
    assert ">Pause</button>" in resumed.get_data(as_text=True)

    deleted = client.post(f"{url}/{sid}/delete", data={"csrf_token": token}, headers=htmx)
    assert "Nothing scheduled" in deleted.get_data(as_text=True)
    assert _schedules(app) == 0

    # Without script: the form posts and comes back to the chat.
    plain = client.post(url, data={"when": "0 7 * * *", "message": "Morning", "csrf_token": token})
    assert plain.status_code == 303 and plain.location.endswith(f"/chats/{chat_id}")
