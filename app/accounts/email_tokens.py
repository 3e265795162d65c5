"""Links mailed to a person: a password reset (an hour) or an address confirmation (a day).

The raw token is in the link only; the database keeps its SHA-256 digest, so a copy of the
database opens no account. A token is used once: claiming it is one UPDATE that only a
token still unused and unexpired matches, so two clicks at once cannot both succeed."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import ForeignKey, String, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.accounts.models import User, hash_token
from app.db import NEVER_REUSED_IDS, Base, utcnow

Purpose = Literal["reset", "verify"]
RESET: Purpose = "reset"
VERIFY: Purpose = "verify"
LIFETIMES: dict[Purpose, timedelta] = {RESET: timedelta(hours=1), VERIFY: timedelta(hours=24)}


class EmailToken(Base):
    __tablename__ = "email_tokens"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    purpose: Mapped[str] = mapped_column(String(10))
    token_digest: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]


def issue_email_token(session: Session, user: User, purpose: Purpose) -> str:
    """A new link token for `user` (added to the session, not committed): the raw value,
    which goes in the mail and nowhere else."""
    raw = secrets.token_urlsafe(32)
    now = utcnow()
    session.add(
        EmailToken(
            user_id=user.id,
            purpose=purpose,
            token_digest=hash_token(raw),
            created_at=now,
            expires_at=now + LIFETIMES[purpose],
        )
    )
    return raw


def _usable(raw: str, purpose: Purpose):
    return (
        EmailToken.token_digest == hash_token(raw),
        EmailToken.purpose == purpose,
        EmailToken.used_at.is_(None),
        EmailToken.expires_at > utcnow(),
    )


def holder_of(session: Session, raw: str, purpose: Purpose) -> User | None:
    """Whose the token is, while it still works (unused, unexpired); None otherwise."""
    found = session.scalar(select(EmailToken.user_id).where(*_usable(raw, purpose)))
    return None if found is None else session.get(User, found)


def claim_email_token(session: Session, raw: str, purpose: Purpose) -> User | None:
    """Use the token (in the session's transaction): its person, or None when it is
    unknown, used or expired. Their other unused links of the same purpose stop working
    too: the newest mail is not the only one that could be lying in a mailbox."""
    user_id = session.execute(
        update(EmailToken)
        .where(*_usable(raw, purpose))
        .values(used_at=utcnow())
        .returning(EmailToken.user_id)
    ).scalar()
    if user_id is None:
        return None
    session.execute(
        update(EmailToken)
        .where(
            EmailToken.user_id == user_id,
            EmailToken.purpose == purpose,
            EmailToken.used_at.is_(None),
        )
        .values(used_at=utcnow())
    )
    return session.get(User, user_id)
