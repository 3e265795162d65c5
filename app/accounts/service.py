"""Creating accounts, shared by sign-up, the admin page and the CLI."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.db import utcnow


class AccountError(ValueError):
    pass


def create_user(
    session: Session, email: str, password: str, *, is_admin: bool = False, verified: bool = True
) -> User:
    """A new account. `verified`: its address counts as confirmed (an admin or the CLI
    typed it); sign-up passes False and confirms it by mail (VERIFY_EMAIL)."""
    email = User.normalize_email(email)
    if "@" not in email or len(email) > 254:
        raise AccountError("Enter a valid email address.")
    if not 8 <= len(password) <= 200:
        raise AccountError("Passwords need 8 to 200 characters.")
    if session.scalar(select(User.id).where(User.email == email)) is not None:
        raise AccountError("An account with that email already exists.")
    user = User(email=email, is_admin=is_admin, email_verified_at=utcnow() if verified else None)
    user.set_password(password)
    session.add(user)
    session.flush()
    return user
