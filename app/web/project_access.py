"""The JSON API's answer to "may the caller do this in that project": the rules are
app/accounts/projects.py's; here they become the API's 404 and 403."""

from __future__ import annotations

from flask_login import current_user

from app.accounts import projects as rules
from app.chat.models import Conversation
from app.web.errors import ApiError
from app.web.identity import db_session


def refused(refusal: rules.ProjectRefused) -> ApiError:
    return ApiError(refusal.status, refusal.message, refusal.code, field=refusal.field)


def require(project_id: int, action: str) -> str:
    """The caller's role in the project, if it allows `action`; else the API's error."""
    try:
        return rules.require(db_session(), current_user.id, project_id, action)
    except rules.ProjectRefused as refusal:
        raise refused(refusal) from None


def set_chat_project(conversation: Conversation, project_id: int) -> None:
    """The chat works in `project_id` from its next run on (a member's, any role: a
    viewer's chat reads without writing). PATCH /api/chats/<id> calls it."""
    require(project_id, rules.READ)
    conversation.project_id = project_id
    conversation.project_chosen = True
