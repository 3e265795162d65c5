"""MCP servers on the pages: the admin's for everyone (Admin → MCP servers) and a person's
own (Settings → MCP servers). One partial, `settings/_mcp_servers.html`, shows either; the
rules are app/mcp/servers.py's, as for the JSON API and the command line."""

from __future__ import annotations

from flask import (
    abort,
    current_app,
    flash,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required

from app.mcp.models import McpServer
from app.mcp.servers import (
    ServerRefused,
    add_server,
    approve_changes,
    approve_read_only,
    check_server,
    find_server,
)
from app.mcp.sign_in import finish_sign_in, sign_out, start_sign_in, views_for
from app.net.fetch import FetchError, check_public_address
from app.web.admin import admin_required
from app.web.admin import bp as admin_bp
from app.web.forms import McpServerForm
from app.web.identity import db_session
from app.web.settings_page import bp as settings_bp


def _owner() -> int | None:
    return None if _admin_scope() else current_user.id


def _admin_scope() -> bool:
    return request.blueprint == "admin"


def _public_only(url: str) -> None:
    settings = current_app.extensions["services"].settings
    try:
        check_public_address(url, settings.fetch_allow_hosts)
    except FetchError as exc:
        raise ValueError(str(exc)) from exc


def _context(form: McpServerForm | None = None, error: str = "") -> dict:
    views = views_for(db_session(), current_user.id, _admin_scope())
    return {
        **views,
        "mcp_form": form or McpServerForm(formdata=None),
        "admin_scope": _admin_scope(),
        "mcp_error": error,
    }


def render_servers(form: McpServerForm | None = None, error: str = "", status: int = 200):
    return render_template("settings/_mcp_servers.html", **_context(form, error)), status


def _add():
    form = McpServerForm()
    if not form.validate():
        return render_servers(form, "Check the fields below.", 400)
    services, session = current_app.extensions["services"], db_session()
    owner = _owner()
    try:
        add_server(
            session,
            services.mcp,
            services.secrets,
            name=form.name.data.strip(),
            owner_id=owner,
            url=(form.url.data or "").strip() or None,
            command=(form.command.data or "").strip() or None,
            headers=form.header_dict(),
            policy=form.policy.data,
            check_url=None if owner is None else _public_only,
        )
    except ServerRefused as exc:
        session.rollback()
        return render_servers(form, str(exc), 400)
    session.commit()
    return render_servers(status=201)


def _visible_server(name: str) -> McpServer:
    """A server the person may sign in to (theirs, or everyone's), else 404. Names do not
    clash between the two, so the name alone says which."""
    session = db_session()
    server = find_server(session, name, current_user.id) or find_server(session, name, None)
    if server is None:
        abort(404)
    return server


@settings_bp.post("/mcp-servers/<name>/sign-in")
@login_required
def sign_in_mcp_server(name: str):
    """Start one's own sign-in to an MCP server that asks for one: the browser goes to
    the server's authorization page and comes back to /settings/mcp-servers/signed-in."""
    services, session = current_app.extensions["services"], db_session()
    server = _visible_server(name)
    try:
        url = start_sign_in(
            session,
            services.mcp,
            services.secrets,
            server,
            current_user,
            redirect_uri=url_for("settings.mcp_signed_in", _external=True),
            allow_hosts=services.settings.fetch_allow_hosts,
        )
    except ServerRefused as exc:
        session.rollback()
        return render_servers(error=str(exc), status=400)
    session.commit()
    if request.headers.get("HX-Request"):
        # A full navigation: the form's own redirect would be held by `form-action 'self'`.
        response = make_response("", 204)
        response.headers["HX-Redirect"] = url
        return response
    return redirect(url, 303)


@settings_bp.get("/mcp-servers/signed-in")
@login_required
def mcp_signed_in():
    """Where a server's authorization page sends the person back (with a code and the
    state their sign-in began with); then back to Settings, saying how it went."""
    services, session = current_app.extensions["services"], db_session()
    if request.args.get("error"):
        flash(f"The sign-in was not completed ({request.args['error'][:80]}).")
        return redirect(url_for("settings.page", _anchor="mcp-heading"), 303)
    try:
        server = finish_sign_in(
            session,
            services.mcp,
            services.secrets,
            current_user,
            state=request.args.get("state", ""),
            code=request.args.get("code", ""),
            issuer=request.args.get("iss"),
            allow_hosts=services.settings.fetch_allow_hosts,
        )
    except ServerRefused as exc:
        session.rollback()
        flash(str(exc))
        return redirect(url_for("settings.page", _anchor="mcp-heading"), 303)
    flash(f"Signed in to {server.name}.{_tools_note(server)}")
    return redirect(url_for("settings.page", _anchor="mcp-heading"), 303)


def _tools_note(server: McpServer) -> str:
    if server.tools:
        return ""
    if server.owner_id is None:
        return " Its tools join the chats once an admin has signed in too (an admin pins them)."
    return " Its tools could not be listed yet: use Check for changes."


@settings_bp.post("/mcp-servers/<name>/sign-out")
@login_required
def sign_out_mcp_server(name: str):
    """Forget one's own sign-in to an MCP server (its tools leave one's chats)."""
    session = db_session()
    sign_out(session, _visible_server(name), current_user)
    session.commit()
    return render_servers()


def _trust(name: str, tool_name: str):
    session = db_session()
    server = find_server(session, name, _owner())
    if server is None:
        abort(404)
    try:
        approve_read_only(server, [tool_name])
    except ServerRefused as exc:
        session.rollback()
        return render_servers(error=str(exc), status=400)
    session.commit()
    return render_servers()


def _act(name: str, action: str):
    services, session = current_app.extensions["services"], db_session()
    server = find_server(session, name, _owner())
    if server is None:
        abort(404)
    try:
        if action == "check":
            check_server(
                session,
                services.mcp,
                services.secrets,
                server,
                services.settings.fetch_allow_hosts,
            )
        elif action == "approve":
            approve_changes(server)
        else:
            session.delete(server)
    except ServerRefused as exc:
        session.rollback()
        return render_servers(error=str(exc), status=400)
    session.commit()
    return render_servers()


@settings_bp.post("/mcp-servers")
@login_required
def add_own_mcp_server():
    """Add an MCP server for oneself (a URL; its tools join one's chats)."""
    return _add()


@settings_bp.post("/mcp-servers/<name>/<any(check, approve, remove):action>")
@login_required
def own_mcp_server_action(name: str, action: str):
    """Check one's MCP server for changed tools, approve them, or remove it."""
    return _act(name, action)


@settings_bp.post("/mcp-servers/<name>/read-only/<tool_name>")
@login_required
def trust_own_mcp_tool(name: str, tool_name: str):
    """Accept one's MCP tool's read-only claim (with the `never` policy it runs unasked)."""
    return _trust(name, tool_name)


@admin_bp.post("/mcp-servers/<name>/read-only/<tool_name>")
@admin_required
def trust_mcp_tool(name: str, tool_name: str):
    """Accept an MCP tool's read-only claim (with the `never` policy it runs unasked)."""
    return _trust(name, tool_name)


@admin_bp.get("/mcp-servers")
@admin_required
def mcp_servers():
    """The MCP servers whose tools everyone's chats may call."""
    return render_template("admin/mcp_servers.html", **_context())


@admin_bp.post("/mcp-servers")
@admin_required
def add_mcp_server():
    """Add an MCP server for everyone."""
    return _add()


@admin_bp.post("/mcp-servers/<name>/<any(check, approve, remove):action>")
@admin_required
def mcp_server_action(name: str, action: str):
    """Check an MCP server for changed tools, approve them, or remove it."""
    return _act(name, action)
