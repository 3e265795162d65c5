"""What lets a turn start, checked before anything is written: the conversation is the
person's (404), no run is in flight in it (409), and the person's allowance and cap on
runs in flight hold (402, 429). The checks read under the locks the turn then writes
under (`lock_for_turn`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Executable, bindparam, func, select
from sqlalchemy.orm import Session, SessionTransaction

from app.accounts.models import ApiToken, User
from app.accounts.project_models import ProjectMember
from app.billing.quota import CREDITS_USED, allowance_used_up, month_of
from app.chat.models import ACTIVE_RUN_STATUSES, Conversation, Run
from app.chat.rows import note_conversation_locked
from app.chat.runs import active_run, lock_conversation
from app.config import Settings
from app.error_codes import ErrorCode
from app.telemetry import metrics

# How long a person over the concurrent-run cap is asked to wait before trying again.
TOO_MANY_RUNS_RETRY_SECONDS = 5


class TurnRejected(Exception):
    def __init__(self, status: int, code: ErrorCode, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


@dataclass
class TurnLock:
    """What a turn's first read holds until its commit: the person's conversation and their
    monthly allowance, both rows locked."""

    conversation: Conversation
    allowance: int | None
    transaction: Any  # the transaction holding the locks


_runs = Run.__table__
# A turn's first read: ownership, the conversation and the person's allowance, in one
# statement built once. Both rows are locked (SQLite's write lock is already held from
# BEGIN IMMEDIATE; PostgreSQL locks both in this statement): the conversation so its
# writers take turns, the person so that two turns started at once in different chats
# cannot both pass the count of runs in flight. That count is a statement of its own, after
# this one: a PostgreSQL statement sees what was committed when it began, before any wait
# for these locks. NO KEY UPDATE leaves inserts that merely reference either row unblocked.
_LOCK_FOR_TURN = (
    select(Conversation, User.monthly_credits)
    .join(User, User.id == Conversation.user_id)
    # Only while the person is a member of the chat's project (removed: 404).
    .join(
        ProjectMember,
        (ProjectMember.project_id == Conversation.project_id) & (ProjectMember.user_id == User.id),
    )
    .where(Conversation.id == bindparam("conversation_id"), User.id == bindparam("user_id"))
    .with_for_update(of=[Conversation.__table__, User.__table__], key_share=True)
    # The row as locked, even if this session loaded it before.
    .execution_options(populate_existing=True)
)
# The same read for a request that signs in with it (`lock_for_turn_signing_in`): the
# person's whole row, found by the session's user id or by the bearer token's hash (the
# token's row with it), so the request's sign-in costs no statement of its own.
_SIGNING_IN_BY_ID = _LOCK_FOR_TURN.with_only_columns(Conversation, User)
_SIGNING_IN_BY_TOKEN = (
    select(Conversation, User, ApiToken)
    .join(User, User.id == Conversation.user_id)
    .join(
        ProjectMember,
        (ProjectMember.project_id == Conversation.project_id) & (ProjectMember.user_id == User.id),
    )
    .join(ApiToken, ApiToken.user_id == User.id)
    .where(
        Conversation.id == bindparam("conversation_id"),
        ApiToken.token_hash == bindparam("token_hash"),
    )
    .with_for_update(of=[Conversation.__table__, User.__table__], key_share=True)
    .execution_options(populate_existing=True)
)
_RUNS_IN_FLIGHT = select(func.count(_runs.c.id)).where(
    _runs.c.user_id == bindparam("user_id"), _runs.c.status.in_(ACTIVE_RUN_STATUSES)
)
# With an allowance, the credits used this month come in the same round trip.
_RUNS_IN_FLIGHT_AND_CREDITS_USED = select(
    _RUNS_IN_FLIGHT.scalar_subquery(), CREDITS_USED.scalar_subquery()
)
_TURN_LOCK = "loopdesk_turn_lock"


def lock_for_turn(session: Session, conversation_id: int, user_id: int) -> TurnLock | None:
    """The person's conversation and allowance, locked for this transaction; None when the
    conversation is not theirs (or gone). Read once a transaction: the request's ownership
    check (app.web.access) and the turn share it."""
    held = session.info.get(_TURN_LOCK)
    if (
        isinstance(held, TurnLock)
        and held.transaction is _innermost_transaction(session)
        and held.conversation.id == conversation_id
        and held.conversation.user_id == user_id
    ):
        return held
    found = session.execute(
        _LOCK_FOR_TURN, {"conversation_id": conversation_id, "user_id": user_id}
    ).first()
    if found is None:
        return None
    note_conversation_locked(session, conversation_id)
    held = TurnLock(found.Conversation, found.monthly_credits, _innermost_transaction(session))
    session.info[_TURN_LOCK] = held
    return held


def lock_for_turn_signing_in(
    session: Session,
    conversation_id: int,
    *,
    user_id: int | None = None,
    token_hash: str | None = None,
) -> tuple[User, ApiToken | None] | None:
    """`lock_for_turn` for a request whose sign-in is this read: the person (by the
    session's `user_id`, or by `token_hash` with the token's row) and the locks on their
    conversation, held for this transaction as `lock_for_turn` holds them. None when the
    conversation is not theirs or nobody matches: the caller signs in the ordinary way and
    the turn refuses (404). Whether the person may sign in at all (a revoked token, an ended
    session) is the caller's check: refused, it rolls back."""
    statement: Executable
    if token_hash is not None:
        statement = _SIGNING_IN_BY_TOKEN
        params: dict[str, Any] = {"conversation_id": conversation_id, "token_hash": token_hash}
    else:
        statement = _SIGNING_IN_BY_ID
        params = {"conversation_id": conversation_id, "user_id": user_id}
    found = session.execute(statement, params).first()
    if found is None:
        return None
    conversation, user = found.Conversation, found.User
    note_conversation_locked(session, conversation_id)
    session.info[_TURN_LOCK] = TurnLock(
        conversation, user.monthly_credits, _innermost_transaction(session)
    )
    return user, (found.ApiToken if token_hash is not None else None)


def _innermost_transaction(session: Session) -> SessionTransaction | None:
    return session.get_nested_transaction() or session.get_transaction()


def _refuse_if_busy(session: Session, conversation: Conversation) -> None:
    """409 while a run is in flight in the conversation. Its row names the active run
    (set and cleared in the transactions that start and end runs); the runs are read only
    when it names one, so a pointer left behind never refuses a turn. The unique index on
    active runs stays the backstop (`start_run`)."""
    if conversation.active_run_id is not None and active_run(session, conversation.id):
        raise TurnRejected(
            409,
            ErrorCode.RUN_IN_FLIGHT,
            "A reply is already being written in this chat. Wait for it or press Stop.",
        )


def locked_idle_conversation(session: Session, conversation_id: int, user_id: int) -> Conversation:
    """The person's conversation, locked, with no run in flight (404 / 409 otherwise)."""
    conversation = lock_conversation(session, conversation_id)
    if conversation is None or conversation.user_id != user_id:
        raise TurnRejected(404, ErrorCode.NOT_FOUND, "Not found.")
    _refuse_if_busy(session, conversation)
    return conversation


def locked_conversation(
    session: Session, settings: Settings, conversation_id: int, user_id: int
) -> Conversation:
    """The conversation, locked, once every check that refuses a turn has passed (404,
    409, then the person's limits); nothing is written before this returns."""
    locked = lock_for_turn(session, conversation_id, user_id)
    if locked is None:
        raise TurnRejected(404, ErrorCode.NOT_FOUND, "Not found.")
    _refuse_if_busy(session, locked.conversation)
    _check_person_limits(session, settings, user_id, locked.allowance)
    return locked.conversation


def _check_person_limits(
    session: Session, settings: Settings, user_id: int, allowance: int | None
) -> None:
    """The monthly credit allowance, then the cap on runs in flight across all of the
    person's conversations: one read, under the person's lock (`lock_for_turn`)."""
    if allowance is None:
        in_flight = session.scalar(_RUNS_IN_FLIGHT, {"user_id": user_id})
    else:
        month = month_of()
        in_flight, used = session.execute(  # (a count: never NULL)
            _RUNS_IN_FLIGHT_AND_CREDITS_USED, {"user_id": user_id, "month": month}
        ).one()
        problem = allowance_used_up(allowance, int(used or 0), month)
        if problem:
            raise TurnRejected(402, ErrorCode.QUOTA_EXCEEDED, problem)
    if (in_flight or 0) >= settings.max_concurrent_runs:
        metrics.rate_limited("too_many_runs")
        raise TurnRejected(
            429,
            ErrorCode.TOO_MANY_RUNS,
            f"You already have {in_flight} {'reply' if in_flight == 1 else 'replies'} being "
            "written in other chats. "
            "Wait for one to finish (or stop one), then send this again.",
            retry_after=TOO_MANY_RUNS_RETRY_SECONDS,
        )
