"""`flask mcp ...`: the admin's MCP servers, offered to everyone (docs/CONTRACT.md)."""

from __future__ import annotations

import json

import click
from flask import current_app
from flask.cli import with_appcontext

from app.mcp.models import POLICIES, McpServer
from app.mcp.servers import (
    ServerRefused,
    add_server,
    admin_servers,
    approve_changes,
    approve_read_only,
    check_server,
    find_server,
    remove_server,
    server_view,
)


def _services():
    return current_app.extensions["services"]


def _headers(raw: tuple[str, ...]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in raw:
        name, colon, value = item.partition(":")
        if not colon or not name.strip():
            raise click.BadParameter(f"{item!r} is not 'Name: value'", param_hint="--header")
        headers[name.strip()] = value.strip()
    return headers


@click.group("mcp")
def mcp_group() -> None:
    """The MCP servers whose tools everyone's chats may call."""


@mcp_group.command("add")
@with_appcontext
@click.argument("name")
@click.option("--url", help="A remote server (streamable HTTP).")
@click.option("--command", "command", help='A local server (stdio): "PROGRAM ARGS".')
@click.option("--header", "headers", multiple=True, help='"Name: value"; stored encrypted.')
@click.option("--policy", type=click.Choice(POLICIES), default="when_tainted", show_default=True)
def add_command(
    name: str, url: str | None, command: str | None, headers: tuple[str, ...], policy: str
) -> None:
    """Add a server for everyone; its tool definitions are pinned now."""
    services = _services()
    with services.database.session() as session:
        try:
            server = add_server(
                session,
                services.mcp,
                services.secrets,
                name=name,
                owner_id=None,
                url=url,
                command=command,
                headers=_headers(headers),
                policy=policy,
            )
        except ServerRefused as exc:
            raise click.ClickException(str(exc)) from exc
        session.commit()
        if server.sign_in:
            click.echo(
                f"Added {name}: it asks each person to sign in. Its tools are listed when an "
                "admin signs in on the Settings page; each person signs in there to use them."
            )
            return
        click.echo(f"Added {name} with {len(server.tools)} tools (policy {policy}).")


@mcp_group.command("list")
@with_appcontext
@click.option("--json", "as_json", is_flag=True, help="As JSON.")
def list_command(as_json: bool) -> None:
    """The servers for everyone, their tools, and changes waiting for approval."""
    with _services().database.session() as session:
        views = [server_view(server) for server in admin_servers(session)]
    if as_json:
        click.echo(json.dumps(views, indent=2))
        return
    if not views:
        click.echo("No MCP servers.")
    for view in views:
        where = view["url"] or view["command"]
        sign_in = "  asks each person to sign in" if view["sign_in"] else ""
        line = f"{view['name']}  {view['transport']}  {where}  policy={view['policy']}{sign_in}"
        click.echo(line)
        for tool in view["tools"]:
            marks = " (read-only, approved)" if tool["read_only_approved"] else ""
            click.echo(f"  - {tool['name']}{marks}")
        if view["pending"]:
            click.echo(f"  changed, waiting for approval: {', '.join(view['pending'])}")


def _admin_server(session, name: str) -> McpServer:
    server = find_server(session, name, None)
    if server is None:
        raise click.ClickException(f"No MCP server named {name!r}.")
    return server


@mcp_group.command("check")
@with_appcontext
@click.argument("name")
def check_command(name: str) -> None:
    """Ask the server for its tools again; changed definitions wait for approval."""
    services = _services()
    with services.database.session() as session:
        server = _admin_server(session, name)
        try:
            waiting = check_server(session, services.mcp, services.secrets, server)
        except ServerRefused as exc:
            raise click.ClickException(str(exc)) from exc
        session.commit()
    click.echo(
        f"{waiting} changed tool definitions wait for approval." if waiting else "No change."
    )


@mcp_group.command("approve")
@with_appcontext
@click.argument("name")
@click.option("--read-only", "read_only", multiple=True, help="Accept this tool's read-only hint.")
def approve_command(name: str, read_only: tuple[str, ...]) -> None:
    """Pin the changed definitions that wait; or accept tools' read-only hints."""
    with _services().database.session() as session:
        server = _admin_server(session, name)
        try:
            if read_only:
                approved = approve_read_only(server, list(read_only))
                message = f"Read-only approved: {', '.join(approved)}."
            else:
                pinned = approve_changes(server)
                message = f"Pinned: {', '.join(pinned)}." if pinned else "Nothing waited."
        except ServerRefused as exc:
            raise click.ClickException(str(exc)) from exc
        session.commit()
    click.echo(message)


@mcp_group.command("remove")
@with_appcontext
@click.argument("name")
def remove_command(name: str) -> None:
    """Remove a server for everyone."""
    with _services().database.session() as session:
        if not remove_server(session, name, None):
            raise click.ClickException(f"No MCP server named {name!r}.")
        session.commit()
    click.echo(f"Removed {name}.")
