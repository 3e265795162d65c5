"""An MCP server Loopdesk calls: added by an admin for everyone (no owner) or by a person
for themselves. Its tool definitions are pinned when it is added; a changed definition
waits in `pending` until the admin (or the owner) approves it, and only pinned ones are
offered to the model."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, LargeBinary, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column

from app.db import NEVER_REUSED_IDS, Base, utcnow

POLICIES = ("always", "when_tainted", "never")


class McpServer(Base):
    __tablename__ = "mcp_servers"
    __table_args__ = (UniqueConstraint("owner_id", "name"), NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(32))
    # None: the admin's, offered to everyone.
    owner_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    url: Mapped[str | None] = mapped_column(String(2000))
    command: Mapped[str | None] = mapped_column(Text)
    # The headers, encrypted (app/mcp/secrets.py); None when there are none.
    sealed_headers: Mapped[bytes | None] = mapped_column(LargeBinary)
    # Their names, to show which are set (never their values).
    header_names: Mapped[list[Any]] = mapped_column(default=list)
    policy: Mapped[str] = mapped_column(String(20), default="when_tainted")
    # The pinned definitions: [{name, title, description, input_schema, read_only_hint}].
    tools: Mapped[list[Any]] = mapped_column(default=list)
    # Definitions the server now gives that differ from the pinned ones (changed or new),
    # waiting for approval; a tool the server dropped is simply not offered.
    pending: Mapped[list[Any]] = mapped_column(default=list)
    # Tools whose read-only hint someone approved: only these may skip the gate.
    read_only_approved: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    checked_at: Mapped[datetime] = mapped_column(default=utcnow)
    # How long the pinned list may be used before asking the server again (its hint).
    list_ttl_seconds: Mapped[int] = mapped_column(default=300)
    # The server asks each person to sign in (OAuth): its tools are offered to those who
    # did, each call with the caller's own tokens (McpSignIn).
    sign_in: Mapped[bool] = mapped_column(default=False, server_default=false())

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


class McpSignIn(Base):
    """One person's sign-in to one server: their tokens and our registration with its
    authorization server, sealed (app/mcp/sealing.py). Only ever used for that person's
    calls. While a sign-in is under way, `sealed_started` holds its PKCE verifier and
    state, and `state_digest` finds it when the person comes back."""

    __tablename__ = "mcp_sign_ins"
    __table_args__ = (UniqueConstraint("server_id", "user_id"), NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    server_id: Mapped[int] = mapped_column(
        ForeignKey("mcp_servers.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    sealed_grant: Mapped[bytes | None] = mapped_column(LargeBinary)
    sealed_started: Mapped[bytes | None] = mapped_column(LargeBinary)
    state_digest: Mapped[str | None] = mapped_column(String(64), index=True)
    started_at: Mapped[datetime | None] = mapped_column()
    signed_in_at: Mapped[datetime | None] = mapped_column()
