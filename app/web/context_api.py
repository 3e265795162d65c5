"""The context gauge on the chat page (rendered on load: the page's `context_gauge`) and as
JSON: `GET /api/chats/<id>/context`, the same numbers."""

from __future__ import annotations

from flask import abort, jsonify
from flask_login import login_required
from pydantic import BaseModel, Field

from app.chat.context_gauge import Gauge
from app.chat.models import Conversation
from app.web import api, chat
from app.web.access import owned_or_404
from app.web.context_gauge import gauge_of
from app.web.openapi import documented


class ContextOut(BaseModel):
    """Estimated tokens, as the request builder counts them for the next call."""

    window: int = Field(description="The model's window: input and reserved output")
    history: int = Field(description="The conversation's messages")
    system_and_tools: int = Field(description="The system prompt and the tool schemas")
    reserved_output: int = Field(description="Room kept for the answer (thinking included)")
    used: int
    percent: int = Field(description="used of window, at most 100")
    label: str
    last_turn_credits: int | None = Field(description="What the chat's last run cost")


@chat.bp.app_template_global("context_gauge")
def gauge_for_page(conversation_id: int) -> Gauge | None:
    """The gauge the chat page renders on load."""
    return gauge_of(conversation_id)


@api.bp.get("/chats/<int:conversation_id>/context")
@documented("GET", "How full the context window is for the next call", response=ContextOut)
@login_required
def chat_context(conversation_id: int):
    owned_or_404(Conversation, conversation_id)
    gauge = gauge_of(conversation_id)
    if gauge is None:  # deleted meanwhile
        abort(404)
    return jsonify(gauge.as_dict())
