"""What tests make: people, offers, chats and drivers, each written once (the conftests
and the test files build on these)."""

from __future__ import annotations

import os
import re
import time
from concurrent import futures

import pytest
from sqlalchemy import select

from app.accounts.models import ApiToken, User
from app.accounts.service import create_user
from app.chat.attachments import save_attachment
from app.chat.conversations import create_conversation
from app.chat.models import ACTIVE_RUN_STATUSES, Conversation, Message, RunLogEntry
from app.workspace.attachments import DEFAULT_MAX_BYTES, prepare_attachment
from app.workspace.models import Offer, Persona
from tests.waiting import eventually, scaled, time_scale

PASSWORD = "correct horse battery"

# -- services -------------------------------------------------------------------------

REDIS_URL = os.environ.get("REDIS_URL", "")
needs_redis = pytest.mark.skipif(
    not REDIS_URL, reason="needs a Redis server: set REDIS_URL (the CI's second pass does)"
)

# -- people ---------------------------------------------------------------------------


def add_user(app, email: str, *, admin: bool = False, password: str = PASSWORD) -> int:
    with app.extensions["database"].session() as session:
        user = create_user(session, email, password, is_admin=admin)
        session.commit()
        return user.id


def user_id_of(app, email="ada@example.com") -> int | None:
    with app.extensions["database"].session() as session:
        return session.scalar(select(User.id).where(User.email == email))


def add_token(
    app, user_id: int, name: str = "script", scopes=("read", "chat"), expires_at=None
) -> tuple[int, str]:
    """A bearer token issued the way the app issues them; returns (id, raw value)."""
    with app.extensions["database"].session() as session:
        token, raw = ApiToken.issue(session.get(User, user_id), name, tuple(scopes), expires_at)
        session.add(token)
        session.commit()
        return token.id, raw


def set_allowance(app, user_id: int, credits: int | None) -> None:
    with app.extensions["database"].session() as session:
        session.get(User, user_id).monthly_credits = credits
        session.commit()


# -- offers ---------------------------------------------------------------------------


def add_offer(app, user_id: int, name: str = "An offer", **values) -> int:
    with app.extensions["database"].session() as session:
        offer = Offer(user_id=user_id, name=name, **values)
        session.add(offer)
        session.commit()
        return offer.id


def add_persona(app, user_id: int, name: str = "A persona", **values) -> int:
    with app.extensions["database"].session() as session:
        persona = Persona(user_id=user_id, name=name, **values)
        session.add(persona)
        session.commit()
        return persona.id


def add_offer_and_persona(app, user_id: int) -> dict:
    """Calm Mornings and its busy founder: {"offer": id, "persona": id}."""
    offer_id = add_offer(
        app, user_id, "Calm Mornings", description="Coaching", brand_colors=["#2f6f5e"]
    )
    return {
        "offer": offer_id,
        "persona": add_persona(app, user_id, "Busy founder", offer_id=offer_id),
    }


# -- chats ----------------------------------------------------------------------------


def add_conversation(app, user_id: int, title: str = "A chat") -> int:
    with app.extensions["database"].session() as session:
        conversation = create_conversation(session, user_id, title)
        session.commit()
        return conversation.id


def rows_after(session, conversation_id: int, after: int = 0, *, include_hidden=False):
    """A conversation's rows with a sequence above `after`, in order."""
    rows = session.scalars(
        select(Message)
        .where(Message.conversation_id == conversation_id, Message.sequence > after)
        .order_by(Message.sequence)
    ).all()
    return rows if include_hidden else [row for row in rows if not row.hidden]


def build_phase_chat(app, chat) -> int:
    """A new chat of the driver's person, already in the build phase."""
    chat_id = chat.new_chat()
    with app.extensions["database"].session() as session:
        session.get(Conversation, chat_id).tool_phase = "build"
        session.commit()
    return chat_id


def run_log_entries(app, run_id, settle=True) -> list[RunLogEntry]:
    """The run's log. With `settle`, wait for the end-of-run flush (the run's status is
    visible a moment before its last entries are written)."""
    entries: list[RunLogEntry] = []

    def settled() -> list[RunLogEntry] | None:
        with app.extensions["database"].session() as session:
            entries[:] = session.scalars(
                select(RunLogEntry).where(RunLogEntry.run_id == run_id).order_by(RunLogEntry.id)
            )
        frames = [e for e in entries if e.kind == "frames"]
        if not settle or any("done" in e.data["counts"] for e in frames):
            return list(entries)
        return None

    return eventually(
        settled,
        timeout=5,
        what=lambda: f"run {run_id}'s log never flushed: {[(e.kind, e.data) for e in entries]}",
    )


def store_attachment(
    session,
    user_id: int,
    conversation_id: int | None,
    filename: str | None,
    content_type: str | None,
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
):
    """An attachment checked and saved as an upload is, in the caller's transaction
    (raises AttachmentRefused)."""
    prepared = prepare_attachment(filename, content_type, data, max_bytes=max_bytes)
    return save_attachment(session, user_id, conversation_id, prepared)


# A quiz agent's output as the model writes it: the cards and the agents tests share it.
QUIZ = {
    "title": "Which morning type are you?",
    "intro": "Five quick questions.",
    "questions": [
        {
            "question": f"Question {n}?",
            "options": [
                {"label": "Early", "scores": {"calm": 2}},
                {"label": "Late", "scores": {"rushed": 2}},
            ],
        }
        for n in range(1, 4)
    ],
    "results": [
        {
            "key": "calm",
            "headline": "Calm",
            "description": "You start well.",
            "call_to_action": "Join",
        },
        {
            "key": "rushed",
            "headline": "Rushed",
            "description": "You start late.",
            "call_to_action": "Join",
        },
    ],
}


# -- drivers --------------------------------------------------------------------------


def csrf_token_from(html: str) -> str:
    match = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html) or re.search(
        r'"X-CSRFToken": "([^"]+)"', html
    )
    assert match, "no CSRF token on the page"
    return match.group(1)


class AuthActions:
    """Create people and log the test client in as them."""

    def __init__(self, app, client):
        self.app = app
        self.client = client
        self.csrf = None

    def create(self, email="ada@example.com", password=PASSWORD, admin=False):
        with self.app.extensions["database"].session() as session:
            user = create_user(session, email, password, is_admin=admin)
            session.commit()
            return user.id

    def login(self, email="ada@example.com", password=PASSWORD):
        token = csrf_token_from(self.client.get("/login").get_data(as_text=True))
        response = self.client.post(
            "/login", data={"email": email, "password": password, "csrf_token": token}
        )
        assert response.status_code == 302, response.get_data(as_text=True)
        self.csrf = csrf_token_from(self.client.get("/settings").get_data(as_text=True))
        return response

    def logout(self):
        return self.client.post("/logout", data={"csrf_token": self.csrf})

    def headers(self) -> dict:
        """Headers a logged-in browser's htmx and fetch calls send."""
        return {"X-CSRFToken": self.csrf}


class ChatDriver:
    """Talks to the app as a script would: the JSON API with a logged-in browser session."""

    def __init__(self, app, client, auth, user_id: int | None = None):
        self.app = app
        self.client = client
        self.auth = auth
        self.user_id = user_id

    def post(self, url, body):
        return self.client.post(url, json=body, headers=self.auth.headers())

    def new_chat(self, title=None) -> int:
        response = self.post("/api/chats", {"title": title} if title else {})
        assert response.status_code == 201, response.get_json()
        return response.get_json()["id"]

    def send(self, chat_id, message) -> int:
        response = self.post(f"/api/chats/{chat_id}/loop", {"message": message})
        assert response.status_code == 202, response.get_json()
        return response.get_json()["runId"]

    def answer(self, chat_id, tool_use_id, result):
        return self.post(
            f"/api/chats/{chat_id}/loop",
            {"toolResponse": {"toolUseId": tool_use_id, "result": result}},
        )

    def wait(self, run_id, timeout=15.0) -> dict:
        """The run once it no longer runs. In-process runs are awaited on their future
        (an event: no poll competes with the run for the GIL); a worker's are polled."""
        started = time.monotonic()
        future = getattr(self.app.extensions["executor"], "futures", {}).get(run_id)
        if future is not None:
            futures.wait([future], timeout=scaled(timeout))
        left = max(timeout - (time.monotonic() - started) / time_scale(), 0)
        last: dict = {}

        def ended() -> dict | None:
            last.update(self.client.get(f"/api/runs/{run_id}").get_json())
            return dict(last) if last["status"] not in ACTIVE_RUN_STATUSES else None

        return eventually(
            ended,
            timeout=left,
            what=lambda: f"run {run_id} still {last.get('status')}",
        )

    def rows(self, chat_id, after=0) -> list[dict]:
        response = self.client.get(f"/api/chats/{chat_id}/messages?after={after}")
        assert response.status_code == 200
        return response.get_json()["messages"]


def logged_in_driver(app, auth) -> ChatDriver:
    """Ada, created and logged in, driving the app."""
    user_id = auth.create()
    auth.login()
    return ChatDriver(app, auth.client, auth, user_id)
