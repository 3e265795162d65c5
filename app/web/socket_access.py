"""A socket ends with the way in it was opened by: the session cookie or the bearer token.

The socket keeps what let it in (SocketAccess). Ending a session or a token publishes an
AccessEnded event to the person through the hub (so over Redis it reaches every web
process); each of their sockets opened by what ended closes with 1008. A socket also
closes when its token expires or its session outlives SESSION_LIFETIME_DAYS, and reads
its way in again (one small query) before each catch-up, so a lost event costs at most
the live frames until the next catch-up, never the rows."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from flask import current_app, g
from flask import session as flask_session
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.accounts.models import ApiToken, User
from app.accounts.project_models import ProjectMember
from app.db import read_transaction
from app.events import AccessEnded
from app.web.session import GENERATION_KEY, LOGIN_AT_KEY

SESSION_ENDED = "Your session ended: log in again."
TOKEN_ENDED = "The token ended: it was revoked or expired."

_tokens = ApiToken.__table__
_users = User.__table__
_TOKEN_STATE = (
    select(_tokens.c.revoked_at, _tokens.c.expires_at)
    .join(_users, _users.c.id == _tokens.c.user_id)
    .where(_tokens.c.id == bindparam("token_id"))
)
_MEMBER = select(ProjectMember.id).where(
    ProjectMember.user_id == bindparam("user_id"),
    ProjectMember.project_id == bindparam("project_id"),
)
_GENERATION = select(_users.c.session_generation).where(_users.c.id == bindparam("user_id"))


@dataclass(frozen=True)
class SocketAccess:
    """What let a socket in: a bearer token (`token_id`) or a session cookie issued under
    `generation`; `ends_at` (epoch seconds) is when it stops letting anyone in by itself."""

    user_id: int
    token_id: int | None
    generation: int | None
    ends_at: float | None
    # The project of the socket's chat: leaving it (or its deletion) closes the socket.
    project_id: int | None = None

    @classmethod
    def of_request(cls, user_id: int, project_id: int | None = None) -> SocketAccess:
        """The way in of the request being upgraded (authenticated already)."""
        token_id = g.get("token_id")
        if token_id is not None:
            return cls(user_id, token_id, None, _epoch(g.get("token_expires_at")), project_id)
        lifetime = current_app.permanent_session_lifetime.total_seconds()
        login_at = flask_session.get(LOGIN_AT_KEY)
        generation = flask_session.get(GENERATION_KEY)
        ends_at = None if login_at is None else login_at + lifetime
        return cls(user_id, None, generation, ends_at, project_id)

    @property
    def ended_message(self) -> str:
        return TOKEN_ENDED if self.token_id is not None else SESSION_ENDED

    def ended_by(self, event: AccessEnded) -> bool:
        if event.everything:
            return True
        if event.project_id is not None:
            return event.project_id == self.project_id
        if self.token_id is not None:
            return event.token_id == self.token_id
        return event.generation is not None and (self.generation or 0) < event.generation

    def expired(self) -> bool:
        return self.ends_at is not None and time.time() >= self.ends_at

    def still_lets_in(self, session: Session) -> bool:
        """Read again: the token unrevoked and unexpired, or the account's session
        generation still the cookie's (and the person still there)."""
        if self.expired():
            return False
        with read_transaction(session):
            if (
                self.project_id is not None
                and session.scalar(
                    _MEMBER, {"user_id": self.user_id, "project_id": self.project_id}
                )
                is None
            ):
                return False
            if self.token_id is not None:
                found = session.execute(_TOKEN_STATE, {"token_id": self.token_id}).first()
                return found is not None and found.revoked_at is None
            generation = session.scalar(_GENERATION, {"user_id": self.user_id})
        return generation is not None and generation == self.generation


def _epoch(moment: datetime | None) -> float | None:
    """A stored (naive UTC) time as epoch seconds."""
    return None if moment is None else moment.replace(tzinfo=UTC).timestamp()


def announce_sessions_ended(user: User) -> None:
    """After committing a bump of `user`'s session generation: their sockets opened by an
    earlier cookie close, in every process."""
    _publish(user.id, AccessEnded(generation=user.session_generation))


def announce_token_revoked(token: ApiToken) -> None:
    _publish(token.user_id, AccessEnded(token_id=token.id))


def announce_person_gone(user_id: int) -> None:
    _publish(user_id, AccessEnded(everything=True))


def announce_left_project(user_id: int, project_id: int) -> None:
    """After committing a member's removal (or the project's deletion): their sockets on
    the project's chats close, in every process."""
    _publish(user_id, AccessEnded(project_id=project_id))


def _publish(user_id: int, event: AccessEnded) -> None:
    current_app.extensions["services"].hub.publish_user(user_id, event)
