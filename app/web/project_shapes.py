"""The shapes of the projects API (app/web/projects_api.py): answers, and the JSON bodies
parsed by these same models (as app/web/shapes.py's)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.web.shapes import NOT_BLANK, Body, ProjectId


class ProjectCreate(Body):
    name: str = Field(min_length=1, max_length=80, pattern=NOT_BLANK)  # as clean_name takes


class ProjectOut(BaseModel):
    id: int
    name: str
    personal: bool
    role: str = Field(description="Your role: owner, editor or viewer")
    created_at: str
    unread: int = Field(0, description="Your chats in it with a reply you have not seen yet")


class ProjectList(BaseModel):
    projects: list[ProjectOut]


class MemberAdd(Body):
    # What add_member takes for an address (app/accounts/projects.py): one with an "@".
    email: str = Field(min_length=3, max_length=254, pattern="@")
    role: Literal["owner", "editor", "viewer"]


class MemberChange(Body):
    role: Literal["owner", "editor", "viewer"]


class MemberOut(BaseModel):
    user_id: int
    email: str
    name: str
    role: str


class InvitationOut(BaseModel):
    id: int
    project_id: int
    project_name: str
    email: str
    role: str
    expires_at: str
    accept_url: str | None = Field(
        None, description="Only in the answer that made it: the link to copy (shown once)"
    )


class MemberList(BaseModel):
    members: list[MemberOut]
    invitations: list[InvitationOut]


class MemberAdded(BaseModel):
    member: MemberOut | None = None
    invitation: InvitationOut | None = None
    mailed: bool = Field(
        description="The mail (the invitation, or a note to an account added at once) was "
        "handed to the SMTP server; false when SMTP_URL is unset: copy `accept_url` instead"
    )


class InvitationList(BaseModel):
    invitations: list[InvitationOut]


class InvitationAccept(Body):
    token: str = Field(min_length=1, max_length=200)


class ChatProjectChange(Body):
    project_id: ProjectId
