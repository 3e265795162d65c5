"""Adding, listing, checking and removing MCP servers: the rules written once for the
command line, the API and the pages.

A server's definitions are untrusted data. They are pinned when it is added; a later list
that differs goes to `pending` and is not offered until approved ("rug pull"). A tool's
read-only hint counts only once someone approves it. Nothing is saved unless all of it is:
the caller commits, and a refusal raises before anything is added."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from sqlalchemy import bindparam, or_, select
from sqlalchemy.orm import Session

from app.db import utcnow
from app.mcp.client import McpClient, McpError, SignInRequired, Target
from app.mcp.models import POLICIES, McpServer
from app.mcp.sealing import SecretBox
from app.mcp.targets import grant_of, keep_grant, keeper_of, target_of

SERVER_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
MAX_TOOLS = 100  # tools one server may offer (their schemas all go into every request)
MAX_DESCRIPTION = 4_000  # characters of one tool's description
MAX_SCHEMA = 20_000  # characters of one tool's input schema, as JSON
MAX_HEADERS = 20
NAME_LIMIT = 64  # the model API's limit on a tool's name, `mcp__<server>__<tool>` whole
DEFAULT_TTL_SECONDS = 300


class ServerRefused(ValueError):
    """The server cannot be added or changed as asked; the message says why, plainly."""


class NameTaken(ServerRefused):
    """Another server of that name is offered to the same people."""


def model_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


# Read on every turn: built once (composing it cost more than running it).
_SERVERS_FOR = (
    select(McpServer)
    .where(or_(McpServer.owner_id.is_(None), McpServer.owner_id == bindparam("user_id")))
    .order_by(McpServer.name, McpServer.id)
)


def servers_for(session: Session, user_id: int) -> list[McpServer]:
    """The servers a person's runs may call: the admin's and their own, by name."""
    return list(session.scalars(_SERVERS_FOR, {"user_id": user_id}))


def admin_servers(session: Session) -> list[McpServer]:
    """The admin's servers, offered to everyone."""
    query = select(McpServer).where(McpServer.owner_id.is_(None))
    return list(session.scalars(query.order_by(McpServer.name)))


def personal_servers(session: Session, user_id: int) -> list[McpServer]:
    query = select(McpServer).where(McpServer.owner_id == user_id)
    return list(session.scalars(query.order_by(McpServer.name)))


def find_server(session: Session, name: str, owner_id: int | None) -> McpServer | None:
    if not SERVER_NAME.fullmatch(name or ""):
        return None  # no server has such a name (and PostgreSQL refuses a NUL in a query)
    owner = McpServer.owner_id.is_(None) if owner_id is None else McpServer.owner_id == owner_id
    return session.scalars(select(McpServer).where(McpServer.name == name, owner)).first()


def add_server(
    session: Session,
    client: McpClient,
    box: SecretBox,
    *,
    name: str,
    owner_id: int | None,
    url: str | None = None,
    command: str | None = None,
    headers: dict[str, str] | None = None,
    policy: str = "when_tainted",
    check_url: Callable[[str], None] | None = None,
) -> McpServer:
    """A new server with its definitions pinned, added to `session` (the caller commits).
    `owner_id` None: the admin's, for everyone; only those may be a command. `check_url`
    refuses an address a person may not reach (private networks) by raising ValueError.
    A server that answers 401 asks each person to sign in: it is added with no tools,
    pinned at its keeper's first sign-in (app/mcp/sign_in.py).
    No transaction is held while the server is asked (on SQLite a read holds the lock)."""
    _check_name(session, name, owner_id)
    if policy not in POLICIES:
        raise ServerRefused(f"The approval policy must be one of: {', '.join(POLICIES)}.")
    if (url is None) == (command is None):
        raise ServerRefused("Give the server either a URL or a command, not both.")
    headers = _checked_headers(headers or {})
    if command is not None:
        target = _command_target(command, owner_id, headers)
    else:
        target = _url_target(str(url), headers, check_url)
    _end_reads(session)
    listed = _listed_or_sign_in(client, target)
    _check_name(session, name, owner_id)  # again: it may have been taken meanwhile
    server = McpServer(
        name=name,
        owner_id=owner_id,
        url=target.url,
        command=command.strip() if command else None,
        sealed_headers=box.seal(headers) if headers else None,
        header_names=sorted(headers),
        policy=policy,
        tools=_checked_tools(name, listed["tools"]) if listed else [],
        pending=[],
        read_only_approved=[],
        list_ttl_seconds=_ttl(listed or {}),
        sign_in=listed is None,
    )
    session.add(server)
    session.flush()
    return server


def _end_reads(session: Session) -> None:
    if session.new or session.dirty or session.deleted:
        raise RuntimeError("a server is asked before anything is written")
    session.rollback()


def _check_name(session: Session, name: str, owner_id: int | None) -> None:
    if not SERVER_NAME.match(name or ""):
        raise ServerRefused(
            "A server's name is a slug: 1 to 32 lower-case letters, digits and single "
            "hyphens, e.g. 'time' or 'git-tools'."
        )
    if "--" in name:
        raise ServerRefused("A server's name may not hold two hyphens in a row.")
    clash = find_server(session, name, None)
    if clash is None and owner_id is not None:
        clash = find_server(session, name, owner_id)
    if clash is not None:
        raise NameTaken(f"There is already a server named {name!r}.")


def _checked_headers(headers: dict[str, str]) -> dict[str, str]:
    if len(headers) > MAX_HEADERS:
        raise ServerRefused(f"At most {MAX_HEADERS} headers.")
    for key, value in headers.items():
        if not HEADER_NAME.match(key):
            raise ServerRefused(f"{key!r} is not a header name.")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0") or len(value) > 4000:
            raise ServerRefused(f"The value of the header {key!r} is not one line of text.")
    return dict(headers)


def _command_target(command: str, owner_id: int | None, headers: dict[str, str]) -> Target:
    if owner_id is not None:
        raise ServerRefused("Only an admin may add a server that runs a local command.")
    if headers:
        raise ServerRefused("A local command takes no headers.")
    try:
        words = tuple(shlex.split(command))
    except ValueError as exc:
        raise ServerRefused(f"The command could not be read: {exc}.") from exc
    if not words:
        raise ServerRefused("The command is empty.")
    return Target(command=words)


def _url_target(
    url: str, headers: dict[str, str], check_url: Callable[[str], None] | None
) -> Target:
    url = url.strip()
    if not re.match(r"^https?://[^\s/]+", url) or len(url) > 2000:
        raise ServerRefused("The server's URL must start with http:// or https://.")
    if "@" in url.split("/")[2]:
        raise ServerRefused("Put credentials in a header, not in the URL.")
    if check_url is not None:
        try:
            check_url(url)
        except ValueError as exc:
            raise ServerRefused(str(exc)) from exc
    return Target(url=url, headers=headers)


def _listed(client: McpClient, target: Target) -> dict[str, Any]:
    try:
        listed = client.list_tools(target)
    except McpError as exc:
        raise ServerRefused(f"The server's tools could not be listed: {exc}") from exc
    if not isinstance(listed.get("tools"), list):
        raise ServerRefused("The server's tool list could not be read.")
    return listed


def _listed_or_sign_in(client: McpClient, target: Target) -> dict[str, Any] | None:
    """The server's tools, or None when it asks each person to sign in (a 401 with no
    headers of ours: with headers, a 401 means they are wrong)."""
    try:
        return _listed(client, target)
    except ServerRefused as refused:
        if not isinstance(refused.__cause__, SignInRequired):
            raise
        if target.headers:
            raise ServerRefused(
                "The server refused the headers given (401 Unauthorized): check them."
            ) from refused
        return None


def _ttl(listed: dict[str, Any]) -> int:
    """The server's cache hint in seconds (0 means: ask every time), else our default."""
    hint = listed.get("ttl_ms")
    if isinstance(hint, int) and not isinstance(hint, bool) and hint >= 0:
        return min(hint // 1000, 86_400)
    return DEFAULT_TTL_SECONDS


def _checked_tools(server: str, tools: list[Any]) -> list[dict[str, Any]]:
    if len(tools) > MAX_TOOLS:
        raise ServerRefused(
            f"The server offers more than {MAX_TOOLS} tools ({len(tools)} were read); at most "
            f"{MAX_TOOLS} are accepted (every tool's schema goes into every request)."
        )
    checked: list[dict[str, Any]] = []
    for tool in tools:
        checked.append(_checked_tool(server, tool))
    names = [tool["name"] for tool in checked]
    if len(set(names)) != len(names):
        raise ServerRefused("The server offers two tools of the same name.")
    return checked


def _checked_tool(server: str, tool: Any) -> dict[str, Any]:
    name = tool.get("name") if isinstance(tool, dict) else None
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ServerRefused(f"The server offers a tool whose name cannot be used: {name!r}.")
    if len(model_name(server, name)) > NAME_LIMIT:
        raise ServerRefused(f"The tool name {name!r} is too long with the server's name.")
    schema = tool.get("input_schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ServerRefused(f"The tool {name!r} has no object input schema.")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ServerRefused(f"The tool {name!r} has an invalid input schema.") from exc
    description = str(tool.get("description") or "")
    if len(description) > MAX_DESCRIPTION or len(repr(schema)) > MAX_SCHEMA:
        raise ServerRefused(f"The tool {name!r} is described at too great a length.")
    title = tool.get("title")
    return {
        "name": name,
        "title": str(title)[:120] if title else None,
        "description": description,
        "input_schema": schema,
        "read_only_hint": bool(tool.get("read_only_hint")),
    }


def list_is_stale(server: McpServer) -> bool:
    return utcnow() >= server.checked_at + timedelta(seconds=server.list_ttl_seconds)


def check_server(
    session: Session,
    client: McpClient,
    box: SecretBox,
    server: McpServer,
    allow_hosts: tuple[str, ...] = (),
) -> int:
    """Ask the server for its tools again; definitions that differ from the pinned ones
    wait in `pending`. Returns how many wait. A server that fails keeps its pinned list.
    A server that asks for a sign-in is asked with its keeper's (app/mcp/targets.py); its
    first list is pinned as a new server's is. The transaction that read `server` ends
    before the server is asked."""
    target, keeper = _checking_target(session, box, server, allow_hosts)
    _end_reads(session)
    try:
        listed = _listed(client, target)
    except ServerRefused as refused:
        failed = refused.__cause__
        if keeper is not None and isinstance(failed, McpError) and failed.grant:
            keep_grant(session, box, server.id, keeper, failed.grant)
            session.commit()  # the refreshed tokens outlive the failure
        raise
    return _compare(session, box, server, listed, keeper)


def _checking_target(
    session: Session, box: SecretBox, server: McpServer, allow_hosts: tuple[str, ...]
) -> tuple[Target, int | None]:
    if not server.sign_in:
        return target_of(server, box, allow_hosts=allow_hosts), None
    keeper = keeper_of(session, server)
    grant = grant_of(session, box, server, keeper) if keeper is not None else None
    if keeper is None or grant is None:
        whose = "its owner" if server.owner_id is not None else "an admin"
        raise ServerRefused(f"The server asks for a sign-in: {whose} must sign in first.")
    return target_of(server, box, allow_hosts=allow_hosts, grant=grant), keeper


def _compare(
    session: Session,
    box: SecretBox,
    server: McpServer,
    listed: dict[str, Any],
    keeper: int | None,
) -> int:
    if keeper is not None:
        keep_grant(session, box, server.id, keeper, listed.get("grant"))
        if not server.tools and not server.pending:
            server.tools = _checked_tools(server.name, listed["tools"])
            server.checked_at = utcnow()
            server.list_ttl_seconds = _ttl(listed)
            return 0
    pinned = {tool["name"]: tool for tool in server.tools}
    waiting: list[dict[str, Any]] = []
    for tool in listed["tools"][: MAX_TOOLS + 1]:
        try:
            checked = _checked_tool(server.name, tool)
        except ServerRefused:
            continue  # an unusable definition is never offered, pinned or not
        if pinned.get(checked["name"]) != checked:
            waiting.append(checked)
    server.pending = waiting[:MAX_TOOLS]
    server.checked_at = utcnow()
    server.list_ttl_seconds = _ttl(listed)
    return len(server.pending)


def approve_changes(server: McpServer) -> list[str]:
    """Pin what waits (a changed definition replaces the pinned one; a new tool joins).
    A changed tool's read-only approval is withdrawn: what was approved was another text."""
    changed = {tool["name"]: tool for tool in server.pending}
    kept = [tool for tool in server.tools if tool["name"] not in changed]
    server.tools = (kept + list(changed.values()))[:MAX_TOOLS]
    server.read_only_approved = [name for name in server.read_only_approved if name not in changed]
    server.pending = []
    return sorted(changed)


def approve_read_only(server: McpServer, tool_names: list[str]) -> list[str]:
    """Accept the read-only hint of these pinned tools: with the `never` policy they run
    without a card. A tool that does not claim to be read-only cannot be approved as one."""
    claims = {tool["name"] for tool in server.tools if tool.get("read_only_hint")}
    refused = [name for name in tool_names if name not in claims]
    if refused:
        raise ServerRefused(f"These tools do not claim to be read-only: {', '.join(refused)}.")
    server.read_only_approved = sorted(set(server.read_only_approved) | set(tool_names))
    return server.read_only_approved


def remove_server(session: Session, name: str, owner_id: int | None) -> bool:
    server = find_server(session, name, owner_id)
    if server is None:
        return False
    session.delete(server)
    return True


def server_view(server: McpServer, signed_in: bool | None = None) -> dict[str, Any]:
    """A server as the API and the command line show it: never a header's value, never a
    token; `signed_in`, where it asks for a sign-in, whether the reader made theirs."""
    view = {
        "name": server.name,
        "scope": "everyone" if server.owner_id is None else "personal",
        "transport": server.transport,
        "url": server.url,
        "command": server.command,
        "headers": list(server.header_names),
        "policy": server.policy,
        "sign_in": server.sign_in,
        "tools": [
            {
                "name": tool["name"],
                "title": tool.get("title"),
                "read_only_hint": bool(tool.get("read_only_hint")),
                "read_only_approved": tool["name"] in server.read_only_approved,
            }
            for tool in server.tools
        ],
        "pending": [tool["name"] for tool in server.pending],
    }
    if server.sign_in and signed_in is not None:
        view["signed_in"] = signed_in
    return view
