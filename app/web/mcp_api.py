"""MCP servers over JSON: the admin's, offered to everyone (`/api/admin/mcp-servers`), and a
person's own (`/api/mcp-servers`). Both call the rules in app/mcp/servers.py, as the
command line does. A person's server is a URL whose host must not be internal (a private,
loopback or metadata address, unless FETCH_ALLOW_HOSTS names it); only an admin may add a
local command."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from flask_login import current_user, login_required

from app.error_codes import ErrorCode
from app.mcp.models import McpServer
from app.mcp.servers import (
    NameTaken,
    ServerRefused,
    add_server,
    approve_changes,
    approve_read_only,
    check_server,
    find_server,
    server_view,
)
from app.mcp.sign_in import views_for
from app.net.fetch import FetchError, check_public_address
from app.web.admin import admin_required
from app.web.api import body_of
from app.web.errors import ApiError
from app.web.identity import db_session
from app.web.mcp_shapes import McpApproveBody, McpServerBody, McpServerOut, McpServersOut
from app.web.openapi import documented

bp = Blueprint("mcp_api", __name__, url_prefix="/api")
REFUSED = (ErrorCode.MCP_SERVER_REFUSED,)


def _services():
    return current_app.extensions["services"]


def _refused(exc: ServerRefused) -> ApiError:
    status = 409 if isinstance(exc, NameTaken) else 400
    return ApiError(status, str(exc), ErrorCode.MCP_SERVER_REFUSED)


def _public_only(url: str) -> None:
    try:
        check_public_address(url, _services().settings.fetch_allow_hosts)
    except FetchError as exc:
        raise ValueError(str(exc)) from exc


def _list(owner_id: int | None):
    return jsonify(
        {"servers": views_for(db_session(), current_user.id, owner_id is None)["servers"]}
    )


def _add(owner_id: int | None):
    body = body_of(McpServerBody)
    services, session = _services(), db_session()
    try:
        server = add_server(
            session,
            services.mcp,
            services.secrets,
            name=body.name,
            owner_id=owner_id,
            url=body.url,
            command=body.command,
            headers=body.headers,
            policy=body.policy,
            check_url=None if owner_id is None else _public_only,
        )
    except ServerRefused as exc:
        session.rollback()
        raise _refused(exc) from None
    session.commit()
    return jsonify(server_view(server)), 201


def _server(name: str, owner_id: int | None) -> McpServer:
    server = find_server(db_session(), name, owner_id)
    if server is None:
        raise ApiError(404, f"No MCP server named {name!r}.", ErrorCode.NOT_FOUND)
    return server


def _delete(name: str, owner_id: int | None):
    session = db_session()
    session.delete(_server(name, owner_id))
    session.commit()
    return "", 204


def _check(name: str, owner_id: int | None):
    services, session = _services(), db_session()
    server = _server(name, owner_id)
    try:
        check_server(
            session, services.mcp, services.secrets, server, services.settings.fetch_allow_hosts
        )
    except ServerRefused as exc:
        session.rollback()
        raise _refused(exc) from None
    session.commit()
    return jsonify(server_view(server))


def _approve(name: str, owner_id: int | None):
    session = db_session()
    server = _server(name, owner_id)  # someone else's is missing, whatever the body
    body = body_of(McpApproveBody)
    try:
        if body.read_only is not None:
            approve_read_only(server, body.read_only)
        else:
            approve_changes(server)
    except ServerRefused as exc:
        session.rollback()
        raise _refused(exc) from None
    session.commit()
    return jsonify(server_view(server))


# -- the admin's, for everyone ---------------------------------------------------------------


@bp.get("/admin/mcp-servers")
@documented("GET", "MCP servers for everyone (admins)", response=McpServersOut)
@admin_required
def list_admin_servers():
    return _list(None)


@bp.post("/admin/mcp-servers")
@documented(
    "POST",
    "Add an MCP server for everyone (admins)",
    response=McpServerOut,
    status=201,
    body=McpServerBody,
    errors=REFUSED,
    description="Its tools are listed now and their definitions pinned.",
)
@admin_required
def add_admin_server():
    return _add(None)


@bp.delete("/admin/mcp-servers/<name>")
@documented("DELETE", "Remove an MCP server for everyone (admins)", status=204)
@admin_required
def delete_admin_server(name: str):
    return _delete(name, None)


@bp.post("/admin/mcp-servers/<name>/check")
@documented(
    "POST", "List an MCP server's tools again (admins)", response=McpServerOut, errors=REFUSED
)
@admin_required
def check_admin_server(name: str):
    return _check(name, None)


@bp.post("/admin/mcp-servers/<name>/approve")
@documented(
    "POST",
    "Approve an MCP server's changed tools or read-only hints (admins)",
    response=McpServerOut,
    body=McpApproveBody,
    errors=REFUSED,
)
@admin_required
def approve_admin_server(name: str):
    return _approve(name, None)


# -- a person's own --------------------------------------------------------------------------


@bp.get("/mcp-servers")
@documented("GET", "Your own MCP servers", response=McpServersOut)
@login_required
def list_own_servers():
    return _list(current_user.id)


@bp.post("/mcp-servers")
@documented(
    "POST",
    "Add an MCP server for yourself",
    response=McpServerOut,
    status=201,
    body=McpServerBody,
    errors=REFUSED,
    description="A URL only (a local command is for admins); its host must not be internal.",
)
@login_required
def add_own_server():
    return _add(current_user.id)


@bp.delete("/mcp-servers/<name>")
@documented("DELETE", "Remove one of your MCP servers", status=204)
@login_required
def delete_own_server(name: str):
    return _delete(name, current_user.id)


@bp.post("/mcp-servers/<name>/check")
@documented("POST", "List your MCP server's tools again", response=McpServerOut, errors=REFUSED)
@login_required
def check_own_server(name: str):
    return _check(name, current_user.id)


@bp.post("/mcp-servers/<name>/approve")
@documented(
    "POST",
    "Approve your MCP server's changed tools or read-only hints",
    response=McpServerOut,
    body=McpApproveBody,
    errors=REFUSED,
)
@login_required
def approve_own_server(name: str):
    return _approve(name, current_user.id)
