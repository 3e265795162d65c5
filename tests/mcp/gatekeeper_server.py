"""An MCP server that asks each person to sign in (OAuth 2.1 with PKCE and dynamic client
registration, the SDK's own authorization server routes), for the tests. Every sign-in is
a new resource owner ("person-1", "person-2", ...), and its `whoami` tool tells whose
token a call carried. POST /short makes the next tokens expire at once (so the next call
refreshes); POST /revoke forgets every access token (so the next call is refused);
GET /log lists the grants it served. `python gatekeeper_server.py PORT`."""

from __future__ import annotations

import secrets
import sys
import time
from itertools import count

import uvicorn
from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse


class Gatekeeper:
    """An authorization server in memory that lets everyone in, each as someone new."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.people = count(1)
        self.log: list[str] = []
        self.expires_in = 3600

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info
        self.log.append("register")

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=f"person-{next(self.people)}",
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code: str):
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(self, client, authorization_code) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.log.append("authorization_code")
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.subject)

    async def load_refresh_token(self, client, refresh_token: str):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token, scopes) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)  # rotated: an old one works once
        self.log.append("refresh_token")
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.subject)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token) -> None:
        self.access.pop(getattr(token, "token", ""), None)

    def _issue(self, client_id: str, scopes: list[str], subject: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, subject=subject
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, subject=subject
        )
        expires_in, self.expires_in = self.expires_in, 3600
        return OAuthToken(
            access_token=access,
            expires_in=expires_in,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )


def build(base: str) -> tuple[MCPServer, Gatekeeper]:
    keeper = Gatekeeper()
    server = MCPServer(
        "gatekeeper",
        auth_server_provider=keeper,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(enabled=True),
        ),
    )

    def whoami() -> str:
        """Say whose sign-in this call carries."""
        token = get_access_token()
        return f"You are {token.subject if token else 'nobody'}."

    server.add_tool(whoami, title="Who am I")

    @server.custom_route("/short", methods=["POST"])
    async def short(_request: Request) -> JSONResponse:
        keeper.expires_in = 0
        return JSONResponse({"next_expires_in": 0})

    @server.custom_route("/revoke", methods=["POST"])
    async def revoke(_request: Request) -> JSONResponse:
        keeper.access.clear()
        keeper.refresh.clear()
        return JSONResponse({"revoked": True})

    @server.custom_route("/log", methods=["GET"])
    async def log(_request: Request) -> JSONResponse:
        return JSONResponse(keeper.log)

    return server, keeper


def main() -> None:
    port = int(sys.argv[1])
    server, _keeper = build(f"http://127.0.0.1:{port}")
    app = server.streamable_http_app(stateless_http=True, json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")


if __name__ == "__main__":
    main()
