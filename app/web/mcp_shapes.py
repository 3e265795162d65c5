"""The MCP servers' JSON shapes (app/web/mcp_api.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.web.shapes import Body

SERVER_NAME = r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$"


class McpServerBody(Body):
    name: str = Field(pattern=SERVER_NAME, description="A slug: lower-case letters, digits, -")
    url: str | None = Field(None, max_length=2000, description="A streamable HTTP server")
    command: str | None = Field(
        None, max_length=2000, description="A local (stdio) server: admins only"
    )
    headers: dict[str, str] | None = Field(
        None, description="Sent with every request (stored encrypted, never shown back)"
    )
    policy: Literal["always", "when_tainted", "never"] = "when_tainted"


class McpApproveBody(Body):
    read_only: list[str] | None = Field(
        None,
        max_length=100,
        description="Accept these tools' read-only hints; without it, pin the changes waiting",
    )


class McpToolOut(BaseModel):
    name: str
    title: str | None
    read_only_hint: bool
    read_only_approved: bool


class McpServerOut(BaseModel):
    name: str
    scope: Literal["everyone", "personal"]
    transport: Literal["http", "stdio"]
    url: str | None
    command: str | None
    headers: list[str] = Field(description="The names of its headers (never their values)")
    policy: str
    tools: list[McpToolOut]
    pending: list[str] = Field(description="Tools whose changed definition waits for approval")
    sign_in: bool = Field(
        description="It asks each person to sign in (OAuth); its tools are offered to those "
        "who did, each call with their own tokens (sign in on the Settings page)"
    )
    signed_in: bool | None = Field(
        None, description="Where it asks for a sign-in: whether the caller signed in"
    )


class McpServersOut(BaseModel):
    servers: list[McpServerOut]
