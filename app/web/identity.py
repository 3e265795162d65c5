"""Who is asking: session cookie or bearer token, and the per-request database session."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from flask import current_app, g, request
from flask import session as flask_session
from flask_login import current_user
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.accounts.models import ApiToken, User, hash_token
from app.chat.turn_checks import lock_for_turn_signing_in
from app.db import Database, as_loaded, read_transaction, utcnow
from app.web.session import session_is_current

if TYPE_CHECKING:
    from app.services import Services


def database() -> Database:
    return current_app.extensions["database"]


def services() -> Services:
    """The app's model, hub, settings and agents, made once by create_app."""
    return current_app.extensions["services"]


def db_session() -> Session:
    """One session per request, closed at teardown."""
    if "db_session" not in g:
        g.db_session = database().session()
    return g.db_session


def close_db_session(_exc: BaseException | None = None) -> None:
    session = g.pop("db_session", None)
    if session is not None:
        session.close()


LAST_USED_RESOLUTION = timedelta(minutes=1)
_tokens = ApiToken.__table__
_users = User.__table__
# Every request of a script signs in with it: built once, not composed per request, and
# read as plain columns (the token's labelled), made into objects by `as_loaded`.
_TOKEN_COLUMNS = {f"token_{column.key}": column.key for column in _tokens.c}
_USER_COLUMNS = tuple(column.key for column in _users.c)
_TOKEN_AND_USER = (
    select(*(_tokens.c[key].label(label) for label, key in _TOKEN_COLUMNS.items()), _users)
    .join(_users, _users.c.id == _tokens.c.user_id)
    .where(_tokens.c.token_hash == bindparam("token_hash"))
)
# A browser's every request reads its person by the session cookie's id.
_USER = select(_users).where(_users.c.id == bindparam("user_id"))


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


# The routes that start a turn in the chat their URL names: their sign-in is the turn's own
# first read (the conversation locked, with the person and the token), not a read before it.
# The body is read by then (app.web.input_gate), so the lock is not held across its wait.
TURN_ENDPOINTS = frozenset({"api.loop", "chat.send_message"})


def _turn_chat_id() -> int | None:
    if request.method != "POST" or request.endpoint not in TURN_ENDPOINTS:
        return None
    return (request.view_args or {}).get("conversation_id")


def _token_and_user(session: Session, token_hash: str) -> tuple[ApiToken, User] | None:
    chat_id = _turn_chat_id()
    if chat_id is not None:
        signed_in = lock_for_turn_signing_in(session, chat_id, token_hash=token_hash)
        if signed_in is not None:
            user, token = signed_in
            assert token is not None
            return token, user
    with read_transaction(session):
        found = session.execute(_TOKEN_AND_USER, {"token_hash": token_hash}).first()
        if found is None:
            return None
        # Made inside the read transaction: adding them after it would begin another.
        row = found._mapping
        token = as_loaded(session, ApiToken, {k: row[label] for label, k in _TOKEN_COLUMNS.items()})
        return token, as_loaded(session, User, {key: row[key] for key in _USER_COLUMNS})


def user_from_bearer(raw: str) -> User | None:
    session = db_session()
    found = _token_and_user(session, hash_token(raw))
    if found is None:
        session.rollback()
        return None
    token, user = found
    if not token.active:
        session.rollback()  # a turn's locks, if its read found the token
        return None
    g.token_scopes = token.scope_set
    g.token_id, g.token_expires_at = token.id, token.expires_at  # a socket ends with them
    now = utcnow()
    # "Last used" is shown to the nearest minute: a script's every request need not write.
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        token.last_used_at = now
        session.commit()
    return user


def load_user_from_request(_request) -> User | None:
    raw = bearer_token()
    if raw is None:
        return None
    user = user_from_bearer(raw)
    if user is not None:
        g.authenticated_by_bearer = True
    return user


def load_user(user_id_text: str) -> User | None:
    if bearer_token() is not None:
        # A request that names a token is judged by that token alone.
        return None
    try:
        user_id = int(user_id_text)
    except ValueError:
        return None
    session = db_session()
    chat_id = _turn_chat_id()
    signed_in = None
    if chat_id is not None:
        signed_in = lock_for_turn_signing_in(session, chat_id, user_id=user_id)
    if signed_in is not None:
        user: User | None = signed_in[0]
    else:
        with read_transaction(session):
            found = session.execute(_USER, {"user_id": user_id}).first()
            user = as_loaded(session, User, dict(found._mapping)) if found is not None else None
    if user is None or not session_is_current(user):
        # Ended (logout, new password, "log out everywhere", deletion) or too old: the
        # browser's cookie is cleared and the request is anonymous.
        session.rollback()  # a turn's locks, if its read found the person
        flask_session.clear()
        return None
    return user


def wants_json() -> bool:
    if request.path.startswith("/api/"):
        return True
    best = request.accept_mimetypes.best_match(["application/json", "text/html"])
    return (
        best == "application/json"
        and request.accept_mimetypes[best] > request.accept_mimetypes["text/html"]
    )


def client_address() -> str:
    """The client's address: the connection's, or with TRUSTED_PROXIES the one the
    trusted proxies name (werkzeug's ProxyFix rewrites remote_addr)."""
    return request.remote_addr or "unknown"


def rate_limit_key() -> str:
    if current_user and current_user.is_authenticated:
        return f"user:{current_user.id}"
    return f"ip:{client_address()}"
