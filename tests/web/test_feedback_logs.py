"""Feedback kept with the run log: listed on the admin's Run logs page with filters and
counts, beside its run there and in `flask chat-logs`."""

from __future__ import annotations

import html

import pytest

from tests.factories import AuthActions
from tests.fake_model import Turn, text


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


@pytest.fixture
def rated(app, chat, fake_model):
    """Two answers of Ada's chat: the first rated down with a comment, the second up."""
    fake_model.script(Turn(text("First answer.")), Turn(text("Second answer.")))
    chat_id = chat.new_chat("Rated chat")
    runs = []
    for message in ("One?", "Two?"):
        runs.append(chat.send(chat_id, message))
        assert chat.wait(runs[-1])["status"] == "completed"
    url = f"/api/chats/{chat_id}/messages/{{}}/feedback"
    assert (
        chat.post(url.format(2), {"rating": -1, "comment": "Missed the point."}).status_code == 200
    )
    assert chat.post(url.format(4), {"rating": 1}).status_code == 200
    return {"id": chat_id, "runs": runs}


@pytest.fixture
def admin(app):
    actions = AuthActions(app, app.test_client())
    actions.create("root@example.com", admin=True)
    actions.login("root@example.com")
    return actions.client


def _page(client, url, status=200) -> str:
    response = client.get(url)
    assert response.status_code == status, url
    return html.unescape(response.get_data(as_text=True))


def test_the_run_logs_page_lists_feedback_with_counts_and_filters(admin, rated):
    first, second = rated["runs"]
    page = _page(admin, "/admin/runs")
    assert "1 thumbs up · 1 thumbs down · 1 with a comment" in page
    assert "Missed the point." in page
    assert f"/admin/conversations/{rated['id']}/runs/{first}" in page
    assert "Rated chat: row 2, run" in page and "Rated chat: row 4, run" in page

    down = _page(admin, "/admin/runs?rating=down")
    assert "Rated chat: row 2" in down and "Rated chat: row 4" not in down
    up = _page(admin, "/admin/runs?rating=up")
    assert "Rated chat: row 4" in up and "Rated chat: row 2" not in up
    commented = _page(admin, "/admin/runs?commented=1")
    assert "Rated chat: row 2" in commented and "Rated chat: row 4" not in commented
    assert "No feedback like this." in _page(admin, "/admin/runs?rating=up&commented=1")
    # The counts are everyone's, whatever the filter.
    assert "1 thumbs up · 1 thumbs down · 1 with a comment" in up
    refused = _page(admin, "/admin/runs?rating=sideways", status=400)
    assert "Filter by a thumbs up or a thumbs down." in refused

    runs = _page(admin, f"/admin/conversations/{rated['id']}/runs")
    run_one = runs.split(f'id="run-{first}"')[1].split(f'id="run-{second}"')[0]
    assert "row 2 · thumbs down · “Missed the point.”" in run_one
    assert "row 4" not in run_one
    assert "row 4 · thumbs up" in runs.split(f'id="run-{second}"')[1]


def test_chat_logs_prints_the_feedback_beside_its_run(app, rated):
    result = app.test_cli_runner().invoke(args=["chat-logs", str(rated["id"])])
    assert result.exit_code == 0, result.output
    first, second = result.output.split(f"Run {rated['runs'][1]} ")
    assert "feedback     row 2 · thumbs down · “Missed the point.”" in first
    assert "feedback     row 4 · thumbs up" in second
