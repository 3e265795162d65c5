"""What a bearer token may do: its scopes, checked before every request it makes.

read: GET (and HEAD) on pages, the API and sockets. chat: every other request that is not
admin: sending, answering cards, stopping, branches, uploads and edits of one's own things.
admin: the admin pages, the admin API and `GET /metrics` (only an admin can hold it, and admin_required
still checks that the person is one). Some account actions need a browser session and
refuse every token: making or revoking tokens (a token never mints tokens), changing the
password, ending sessions, logging out."""

from __future__ import annotations

from flask import g, jsonify, request
from flask_login import current_user

from app.error_codes import ErrorCode
from app.web.identity import bearer_token

SESSION_ONLY_ENDPOINTS = frozenset(
    {
        "settings.create_token",
        "settings.revoke_token",
        "settings.change_password",
        "settings.end_sessions_everywhere",
        "auth.logout",
    }
)
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def required_scope(endpoint: str, path: str, method: str) -> str:
    if endpoint.partition(".")[0] in ("admin", "metrics") or path.startswith("/api/admin/"):
        return "admin"
    if endpoint == "mcp_server.endpoint":
        return "read"  # every MCP message is a POST; each tool checks its own scope
    return "read" if method in READ_METHODS else "chat"


def check_token_scope():
    if bearer_token() is None or request.endpoint is None:
        return None
    if not current_user.is_authenticated:
        return None  # a bad token: login_required answers 401
    if request.endpoint in SESSION_ONLY_ENDPOINTS:
        return _refused(
            ErrorCode.SESSION_REQUIRED, "This needs a browser session: a token cannot do it."
        )
    scope = required_scope(request.endpoint, request.path, request.method)
    if scope not in g.get("token_scopes", frozenset()):
        return _refused(ErrorCode.INSUFFICIENT_SCOPE, f"This token lacks the {scope!r} scope.")
    return None


def _refused(code: ErrorCode, message: str):
    """JSON on every route, pages too: whoever sends a token is a script."""
    return jsonify({"error": {"code": code, "message": message}}), 403
