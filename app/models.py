"""Every model, imported once so Alembic and the tests see the whole schema."""

from app.accounts.email_tokens import EmailToken
from app.accounts.models import ApiToken, User
from app.accounts.project_models import Project, ProjectInvitation, ProjectMember
from app.agents.models import Guideline, GuidelineChange
from app.billing.models import UsageEvent
from app.chat.feedback import AnswerFeedback
from app.chat.models import ChatShare, Conversation, Message, QueuedMessage, Run, RunLogEntry
from app.chat.offered_models import OfferedModel
from app.chat.preset_models import Preset
from app.chat.schedule_models import ChatSchedule
from app.db import Base
from app.mcp.models import McpServer
from app.memory.models import MemoryChange, UserMemory
from app.workspace.models import (
    Attachment,
    Campaign,
    Character,
    ImagePreset,
    Offer,
    Output,
    Persona,
    VisualAsset,
)

__all__ = [
    "AnswerFeedback",
    "ApiToken",
    "Attachment",
    "Base",
    "Campaign",
    "Character",
    "ChatSchedule",
    "ChatShare",
    "Conversation",
    "EmailToken",
    "Guideline",
    "GuidelineChange",
    "ImagePreset",
    "MemoryChange",
    "McpServer",
    "Message",
    "Offer",
    "OfferedModel",
    "Output",
    "Persona",
    "Preset",
    "Project",
    "ProjectInvitation",
    "ProjectMember",
    "QueuedMessage",
    "Run",
    "RunLogEntry",
    "UsageEvent",
    "User",
    "UserMemory",
    "VisualAsset",
]
