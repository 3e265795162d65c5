"""Where a call to a server goes, and with whose credentials: the server's headers, opened
for the call only, and for a server that asks each person to sign in, the caller's own
grant (McpSignIn), never anyone else's. A person's own server may not reach internal
addresses, whatever its metadata names."""

from __future__ import annotations

import shlex
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.mcp.client import Target
from app.mcp.models import McpServer, McpSignIn
from app.mcp.sealing import SecretBox


class NotSignedIn(ValueError):
    """The server asks for a sign-in this person has not made (or that ended)."""


def target_of(
    server: McpServer,
    box: SecretBox,
    *,
    allow_hosts: tuple[str, ...] = (),
    grant: dict[str, Any] | None = None,
) -> Target:
    """Where to reach the server, its headers opened: for the call only, never stored."""
    if server.command:
        return Target(command=tuple(shlex.split(server.command)))
    headers = box.open(server.sealed_headers) if server.sealed_headers else {}
    personal = server.owner_id is not None
    return Target(
        url=server.url,
        headers=headers,
        grant=grant,
        public_only=personal,
        allow_hosts=allow_hosts if personal else (),
    )


def sign_in_of(session: Session, server_id: int, user_id: int) -> McpSignIn | None:
    query = select(McpSignIn).where(McpSignIn.server_id == server_id, McpSignIn.user_id == user_id)
    return session.scalars(query).first()


def grant_of(session: Session, box: SecretBox, server: McpServer, user_id: int) -> dict | None:
    row = sign_in_of(session, server.id, user_id)
    if row is None or row.sealed_grant is None:
        return None
    return box.open(row.sealed_grant)


def person_target(
    session: Session,
    box: SecretBox,
    server: McpServer,
    user_id: int,
    allow_hosts: tuple[str, ...] = (),
) -> Target:
    """The target for this person's call: with their grant where the server asks for one."""
    if not server.sign_in:
        return target_of(server, box, allow_hosts=allow_hosts)
    grant = grant_of(session, box, server, user_id)
    if grant is None:
        raise NotSignedIn(
            f"Sign in to the MCP server {server.name} first (Settings → MCP servers)."
        )
    return target_of(server, box, allow_hosts=allow_hosts, grant=grant)


def keep_grant(
    session: Session, box: SecretBox, server_id: int, user_id: int, refreshed: dict | None
) -> None:
    """Seal the tokens the SDK refreshed during a call (a rotated refresh token must be
    kept, or the next refresh fails). The caller commits."""
    if not refreshed:
        return
    row = sign_in_of(session, server_id, user_id)
    if row is None or row.sealed_grant is None:
        return  # signed out meanwhile: nothing to keep
    grant = box.open(row.sealed_grant)
    grant.update(tokens=refreshed["tokens"], expires_at=refreshed.get("expires_at"))
    row.sealed_grant = box.seal(grant)


def keeper_of(session: Session, server: McpServer) -> int | None:
    """Whose sign-in checks a server's tool list: the owner's for a person's own server,
    the first admin's who signed in for a server everyone may use."""
    query = select(McpSignIn.user_id).where(
        McpSignIn.server_id == server.id, McpSignIn.sealed_grant.is_not(None)
    )
    if server.owner_id is not None:
        query = query.where(McpSignIn.user_id == server.owner_id)
    else:
        query = query.join(User, User.id == McpSignIn.user_id).where(User.is_admin.is_(True))
    return session.scalars(query.order_by(McpSignIn.signed_in_at, McpSignIn.id)).first()


def signed_in_server_ids(session: Session, user_id: int) -> set[int]:
    query = select(McpSignIn.server_id).where(
        McpSignIn.user_id == user_id, McpSignIn.sealed_grant.is_not(None)
    )
    return set(session.scalars(query))
