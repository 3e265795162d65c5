"""People and their API tokens."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import secrets
from datetime import datetime
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import ForeignKey, String, false, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db import NEVER_REUSED_IDS, Base, utcnow

_hasher = PasswordHasher()
TOKEN_PREFIX = "ld_"
# What a bearer token may do (app.web.scopes): read = GET pages and API; chat = every
# other non-admin request (sending, answering cards, stopping, editing one's own things);
# admin = the admin pages and API, for admins only.
SCOPES = ("read", "chat", "admin")
DEFAULT_SCOPES = ("read", "chat")


class User(Base):
    __tablename__ = "users"
    # A deleted person's id is never handed to a new account (a stale cookie names it).
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    display_name: Mapped[str] = mapped_column(String(80), default="")
    is_admin: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # First-run personalization (the /welcome step). Only accounts made through sign-up
    # are asked (`needs_onboarding`); accounts made by an admin, the CLI or tests are not.
    role: Mapped[str] = mapped_column(String(120), default="", server_default="")
    company: Mapped[str] = mapped_column(String(120), default="", server_default="")
    website: Mapped[str] = mapped_column(String(300), default="", server_default="")
    needs_onboarding: Mapped[bool] = mapped_column(default=False, server_default=false())
    onboarded_at: Mapped[datetime | None]
    # Suggested first requests for the empty chat: [{"title": ..., "prompt": ...}].
    starters: Mapped[list[Any]] = mapped_column(default=list, server_default=text("'[]'"))
    # Credits a month; None is unlimited (the default). Set by an admin.
    monthly_credits: Mapped[int | None]
    # Every session cookie carries the generation it was issued under; bumping it (log
    # out, a new password, "log out everywhere", deletion) ends every copy of every cookie.
    session_generation: Mapped[int] = mapped_column(default=0, server_default=text("0"))
    # Colour theme: "system" follows the browser's light/dark preference; "light" or
    # "dark" is the person's own choice (the toggle in the top bar, or Settings).
    theme: Mapped[str] = mapped_column(String(10), default="system", server_default="system")
    # When the person proved the address is theirs (a mailed link, or a password reset
    # through one). None: not confirmed, which matters only with VERIFY_EMAIL on; accounts
    # made by an admin, the CLI, or from before the column, count as confirmed.
    email_verified_at: Mapped[datetime | None]

    tokens: Mapped[list[ApiToken]] = relationship(
        back_populates="user", cascade="all, delete-orphan"
    )

    # Flask-Login's protocol, written out so this module stays free of Flask.
    is_authenticated = True
    is_active = True
    is_anonymous = False

    def get_id(self) -> str:
        return str(self.id)

    @staticmethod
    def normalize_email(email: str) -> str:
        return email.strip().lower()

    def set_password(self, password: str) -> None:
        self.password_hash = _hasher.hash(password)

    def check_password(self, password: str) -> bool:
        try:
            return _hasher.verify(self.password_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    @property
    def must_onboard(self) -> bool:
        """Signed up and has neither finished nor skipped the welcome step."""
        return bool(self.needs_onboarding) and self.onboarded_at is None

    @property
    def name(self) -> str:
        return self.display_name or self.email.split("@")[0]


def dummy_password_check(password: str) -> None:
    """Spend the same time as a real check, so timing does not reveal unknown emails."""
    with contextlib.suppress(VerificationError, InvalidHashError):
        _hasher.verify(_dummy_hash(), password)


def spend_a_password_hash(password: str) -> None:
    """Spend what hashing a new password costs, where no account is made."""
    _hasher.hash(password)


@functools.cache
def _dummy_hash() -> str:
    """Made at the first unknown-email login, not at import: an argon2 hash is a quarter
    of a second that every process (`db upgrade`, a worker) would pay for nothing."""
    return _hasher.hash("not-a-real-password")


def end_sessions(user: User) -> None:
    """Every session cookie issued so far stops working (app.web.identity checks it)."""
    user.session_generation = (user.session_generation or 0) + 1


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(Base):
    """A bearer token for scripts; only its hash is stored, the raw value is shown once."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(80))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    display_prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    # Space-separated, from SCOPES. Tokens made before scopes existed could do anything
    # but admin (the migration gives admins' old tokens "admin" too).
    scopes: Mapped[str] = mapped_column(String(40), default="read chat", server_default="read chat")
    expires_at: Mapped[datetime | None]

    user: Mapped[User] = relationship(back_populates="tokens")

    @classmethod
    def issue(
        cls,
        user: User,
        name: str,
        scopes: tuple[str, ...] = DEFAULT_SCOPES,
        expires_at: datetime | None = None,
    ) -> tuple[ApiToken, str]:
        unknown = set(scopes) - set(SCOPES)
        if unknown or not scopes:
            raise ValueError(f"unknown or no scopes: {sorted(unknown)}")
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls(
            user=user,
            name=name,
            token_hash=hash_token(raw),
            display_prefix=raw[:10],
            scopes=" ".join(s for s in SCOPES if s in scopes),
            expires_at=expires_at,
        )
        return token, raw

    @property
    def scope_set(self) -> frozenset[str]:
        return frozenset(self.scopes.split())

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= utcnow()

    @property
    def active(self) -> bool:
        return self.revoked_at is None and not self.expired
