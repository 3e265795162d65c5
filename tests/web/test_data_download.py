"""The "Download all my data" zip has its limits per person: DATA_DOWNLOAD_MAX_BYTES (413
`DOWNLOAD_TOO_LARGE`, saying so) and RATE_LIMIT_DATA_DOWNLOADS (429 saying it is the
downloads, with Retry-After). Its zip is built off the serving loop: tests/test_blocking.py."""

from __future__ import annotations

import pytest

from app.chat.rows import insert_message
from app.workspace.attachments import human_size
from app.workspace.models import Attachment
from tests.factories import add_conversation, add_token, add_user
from tests.web.helpers import bearer, database

CAP = 2_000


@pytest.fixture
def app(make_app):
    return make_app(data_download_max_bytes=CAP, rate_limit_data_downloads="2 per hour")


def _attach(app, user_id: int, size: int) -> None:
    with database(app).session() as session:
        session.add(
            Attachment(
                user_id=user_id,
                filename="scan.pdf",
                content_type="application/pdf",
                size=size,
                data=b"%" * size,
            )
        )
        session.commit()


def test_a_download_over_the_cap_answers_413_saying_so(app, client, user):
    _attach(app, user, CAP + 1)  # the files alone pass it: refused before any zip

    page = client.get("/settings/data.zip")
    assert page.status_code == 413
    assert "too large to download at once" in page.get_data(as_text=True)
    assert f"at most {human_size(CAP)}." in page.get_data(as_text=True)

    # Files under it, but the chats take the zip past it: refused as the zip passes it.
    other = add_user(app, "grace@example.com")
    _attach(app, other, CAP // 2)
    chat = add_conversation(app, other, "Long one")
    with database(app).session() as session:
        insert_message(session, chat, role="user", kind="user", content="words " * 400)
        session.commit()
    _, raw = add_token(app, other)
    scripted = client.get("/api/export", headers=bearer(raw))
    assert scripted.status_code == 413
    assert scripted.get_json()["error"]["code"] == "DOWNLOAD_TOO_LARGE"


def test_downloads_past_the_limit_answer_429_saying_they_are_downloads(app, client, user):
    _attach(app, user, 100)
    _, raw = add_token(app, user)
    assert client.get("/settings/data.zip", buffered=True).status_code == 200
    # The API shares the page's budget.
    assert client.get("/api/export", headers=bearer(raw), buffered=True).status_code == 200

    refused = client.get("/settings/data.zip")
    assert refused.status_code == 429
    assert "Too many downloads of all your data" in refused.get_data(as_text=True)
    assert '<a href="/settings">Back to your settings</a>' in refused.get_data(as_text=True)
    assert 0 < int(refused.headers["Retry-After"]) <= 3600
    scripted = client.get("/api/export", headers=bearer(raw))
    assert scripted.status_code == 429
    assert scripted.get_json()["error"]["code"] == "RATE_LIMITED"
