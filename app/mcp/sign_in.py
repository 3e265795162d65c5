"""A person's sign-in to an MCP server that asks for one (OAuth 2.1 with PKCE; the SDK's
client runs in the bridge). It spans two requests that any process may serve: `start`
seals the PKCE verifier, the state and our registration with the server's authorization
server in the person's McpSignIn row and gives the URL to send them to; `finish` finds
that row by the state's digest (only the person's own, once, within ten minutes),
exchanges the code, and seals their tokens. The first sign-in of a server's keeper (its
owner, or an admin for everyone's) pins its tools, as adding any other server does."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.db import utcnow
from app.mcp.client import McpClient, McpError
from app.mcp.models import McpServer, McpSignIn
from app.mcp.sealing import SecretBox
from app.mcp.servers import (
    ServerRefused,
    admin_servers,
    check_server,
    personal_servers,
    server_view,
)
from app.mcp.targets import sign_in_of, signed_in_server_ids, target_of

SIGN_IN_MINUTES = 10  # from the start to the person's return


class SignInRefused(ServerRefused):
    """The sign-in cannot go on; the message says why, plainly."""


def may_sign_in(server: McpServer, user: User) -> bool:
    """Everyone may sign in to a server for everyone; only its owner to a person's own."""
    return server.sign_in and server.owner_id in (None, user.id)


def start_sign_in(
    session: Session,
    client: McpClient,
    box: SecretBox,
    server: McpServer,
    user: User,
    *,
    redirect_uri: str,
    allow_hosts: tuple[str, ...] = (),
) -> str:
    """The authorization URL to send the person to; their verifier and state are sealed in
    `session` (the caller commits). No transaction is held while the server is asked."""
    if not may_sign_in(server, user):
        raise SignInRefused(f"The MCP server {server.name} asks for no sign-in.")
    row = sign_in_of(session, server.id, user.id)
    earlier = box.open(row.sealed_grant) if row is not None and row.sealed_grant else {}
    grant = {"redirect_uri": redirect_uri, "client_info": _same_uri(earlier, redirect_uri)}
    target = target_of(server, box, allow_hosts=allow_hosts, grant=grant)
    server_id, user_id = server.id, user.id
    session.commit()
    try:
        started = client.start_sign_in(target)
    except McpError as exc:
        raise SignInRefused(f"The sign-in could not start: {exc}") from exc
    url = str(started.pop("authorization_url", ""))
    if not url.startswith(("https://", "http://")):
        raise SignInRefused("The server named no usable place to sign in.")
    row = sign_in_of(session, server_id, user_id) or McpSignIn(server_id=server_id, user_id=user_id)
    row.sealed_started = box.seal({**started, "redirect_uri": redirect_uri})
    row.state_digest = _digest(str(started["state"]))
    row.started_at = utcnow()
    session.add(row)
    return url


def _same_uri(grant: dict[str, Any], redirect_uri: str) -> dict[str, Any] | None:
    """Our earlier registration, kept while it names the same return address."""
    info = grant.get("client_info")
    if info and redirect_uri in (info.get("redirect_uris") or []):
        return info
    return None


def finish_sign_in(
    session: Session,
    client: McpClient,
    box: SecretBox,
    user: User,
    *,
    state: str,
    code: str,
    issuer: str | None = None,
    allow_hosts: tuple[str, ...] = (),
) -> McpServer:
    """The person's tokens sealed, once their authorization server sent them back with a
    code; the server's tools pinned if they are its keeper's first. Commits."""
    row = _started_by(session, user, state)
    started = box.open(row.sealed_started or b"")
    # Used once: cleared before the code is exchanged, whatever comes of it.
    row.sealed_started, row.state_digest = None, None
    server = session.get(McpServer, row.server_id)
    if server is None or not hmac.compare_digest(str(started.get("state")), state):
        session.commit()
        raise SignInRefused("This sign-in is not one you started.")
    grant = {"redirect_uri": started["redirect_uri"]}
    target = target_of(server, box, allow_hosts=allow_hosts, grant=grant)
    row_id, server_id = row.id, server.id
    session.commit()
    try:
        granted = client.finish_sign_in(target, started, code, issuer)
    except McpError as exc:
        raise SignInRefused(f"The sign-in failed: {exc}") from exc
    kept = session.get(McpSignIn, row_id)
    if kept is None:
        raise SignInRefused("The server was removed during the sign-in.")
    kept.sealed_grant = box.seal({**granted, "redirect_uri": started["redirect_uri"]})
    kept.signed_in_at = utcnow()
    session.commit()
    server = session.get(McpServer, server_id)
    if server is None:
        raise SignInRefused("The server was removed during the sign-in.")
    _pin_first_list(session, client, box, server, allow_hosts)
    return server


def _started_by(session: Session, user: User, state: str) -> McpSignIn:
    if not state or len(state) > 200:
        raise SignInRefused("The sign-in came back without its state.")
    query = select(McpSignIn).where(
        McpSignIn.user_id == user.id, McpSignIn.state_digest == _digest(state)
    )
    row = session.scalars(query).first()
    if row is None or row.sealed_started is None or row.started_at is None:
        raise SignInRefused("This sign-in is not one you started, or it was already used.")
    if utcnow() - row.started_at > timedelta(minutes=SIGN_IN_MINUTES):
        row.sealed_started, row.state_digest = None, None
        session.commit()
        raise SignInRefused("The sign-in took too long: start it again.")
    return row


def _pin_first_list(
    session: Session,
    client: McpClient,
    box: SecretBox,
    server: McpServer,
    allow_hosts: tuple[str, ...],
) -> None:
    """A server with nothing pinned yet gets its list now, if this was its keeper's
    sign-in (anyone else's does not decide what everyone's chats may call)."""
    if server.tools or server.pending:
        return
    try:
        check_server(session, client, box, server, allow_hosts)
    except ServerRefused:
        session.rollback()
        return  # not the keeper's sign-in, or the list failed: pinned on a later check
    session.commit()


def views_for(session: Session, user_id: int, admin_scope: bool) -> dict[str, list[dict]]:
    """What the pages show: the admin's servers, or a person's own, and besides their own,
    the servers for everyone that ask them to sign in; each saying whether they did."""
    mine = signed_in_server_ids(session, user_id)
    listed = admin_servers(session) if admin_scope else personal_servers(session, user_id)
    shared = [] if admin_scope else [s for s in admin_servers(session) if s.sign_in]
    return {
        "servers": [server_view(server, server.id in mine) for server in listed],
        "shared_sign_in": [server_view(server, server.id in mine) for server in shared],
    }


def sign_out(session: Session, server: McpServer, user: User) -> bool:
    """Forget the person's tokens for this server (the caller commits)."""
    row = sign_in_of(session, server.id, user.id)
    if row is None:
        return False
    session.delete(row)
    return True


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()
