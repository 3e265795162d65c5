"""Conversations, their message rows, and runs of the host loop."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    Connection,
    ForeignKey,
    Index,
    String,
    Table,
    Text,
    UniqueConstraint,
    event,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.accounts.project_models import in_personal_project_by_default
from app.chat import search_index
from app.chat.preset_models import Preset  # noqa: F401  (the table a chat's preset_id names)
from app.db import NEVER_REUSED_IDS, Base, utcnow


class ConversationStatus(StrEnum):
    """Stored as these strings and sent on the wire as they are (a StrEnum is its str)."""

    IDLE = "IDLE"
    STREAMING = "STREAMING"
    ERROR = "ERROR"


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    AWAITING = "awaiting"  # a card waits for the person's answer
    COMPLETED = "completed"
    ERROR = "error"
    CANCELLED = "cancelled"


ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
# The same as SQL, written out: the partial index of active runs below has it as its
# condition, and a query finds its rows through that index only when it states it in the
# same words (bound parameters would not do: SQLite cannot tell what they will be).
ACTIVE_RUN_CONDITION = f"status IN ('{RunStatus.QUEUED}', '{RunStatus.RUNNING}')"


def run_is_active() -> Any:
    """`runs.status` is queued or running, in words the partial index of active runs reads:
    a query with it reads the few active runs, not every run there is."""
    return text(f"runs.{ACTIVE_RUN_CONDITION}")


FINISHED_RUN_STATUSES = (
    RunStatus.AWAITING,
    RunStatus.COMPLETED,
    RunStatus.ERROR,
    RunStatus.CANCELLED,
)


# Where a conversation's title came from: the placeholder, the first words of the first
# message, the fast model (after the first exchange), or the person (never replaced).
TITLE_DEFAULT, TITLE_MESSAGE, TITLE_MODEL, TITLE_PERSON = "default", "message", "model", "person"


class Conversation(Base):
    __tablename__ = "conversations"
    __table_args__ = NEVER_REUSED_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # The project whose workspace the host reads and writes (app/accounts/projects.py);
    # only its owner (user_id) sees the chat, and only while a member of the project.
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    # Whether the project was chosen (at creation, by PATCH or the select_project card);
    # until then a person in several projects may be asked which one.
    project_chosen: Mapped[bool] = mapped_column(default=False, server_default=false())
    title: Mapped[str] = mapped_column(String(120), default="New chat")
    title_source: Mapped[str] = mapped_column(
        String(16), default=TITLE_DEFAULT, server_default=TITLE_DEFAULT
    )
    status: Mapped[str] = mapped_column(String(16), default=ConversationStatus.IDLE)
    active_run_id: Mapped[int | None]
    tool_phase: Mapped[str] = mapped_column(String(16), default="discovery")
    summary: Mapped[str | None] = mapped_column(Text)
    summarized_up_to_sequence: Mapped[int] = mapped_column(default=0)
    # The shown branch (app/chat/branches.py): its leaf when it was last chosen, and the
    # conversation's last sequence at that moment. Both NULL: never branched (one line).
    branch_leaf_sequence: Mapped[int | None]
    branch_chosen_at_sequence: Mapped[int | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    # How the person keeps their list (app/chat/organize.py): pinned chats come first, a
    # folder groups chats by a name of the person's, an archived chat leaves the list
    # (still searchable and restorable). NULL: not pinned, in no folder, not archived.
    pinned_at: Mapped[datetime | None]
    archived_at: Mapped[datetime | None]
    folder: Mapped[str | None] = mapped_column(String(60))
    # The model the person picked (app/chat/model_choice.py); NULL: the default. A name,
    # not a reference: a model taken off the list leaves the chat on the default.
    model: Mapped[str | None] = mapped_column(String(100))
    # A reply ended (or paused on a card) that the person has not seen yet: the sidebar's
    # dot, cleared when they look at the chat (app/chat/unread.py).
    unread: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The preset it was started from (app/chat/presets.py); NULL: none, or it was deleted.
    preset_id: Mapped[int | None] = mapped_column(
        ForeignKey("presets.id", ondelete="SET NULL"), index=True
    )

    def touch(self) -> None:
        self.updated_at = utcnow()

    @property
    def pinned(self) -> bool:
        return self.pinned_at is not None

    @property
    def archived(self) -> bool:
        return self.archived_at is not None


class Message(Base):
    """One row of a conversation. `meta` holds the Anthropic blocks, hidden, awaiting, card
    and agentOutput: what each kind keeps is app/row_meta.py's, read through
    `chat.shapes.meta_of`. `sequence` is allocated only by `chat.rows.insert_message`."""

    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("conversation_id", "sequence"), NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    sequence: Mapped[int]
    # The row this one follows on its branch (NULL for the first row); set by the insert.
    parent_sequence: Mapped[int | None]
    role: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    @property
    def hidden(self) -> bool:
        return bool(self.meta.get("hidden"))


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        # At most one queued or running run per conversation, enforced by the database so
        # that two processes racing to start a run cannot both win.
        Index(
            "uq_runs_one_active_per_conversation",
            "conversation_id",
            unique=True,
            sqlite_where=text(ACTIVE_RUN_CONDITION),
            postgresql_where=text(ACTIVE_RUN_CONDITION),
        ),
        # Every turn counts the person's runs in flight (app/chat/turn_checks.py): by
        # person and status, so the count reads the few active entries, not every run the
        # person ever had. (It serves lookups by person alone too.)
        Index("ix_runs_user_id_status", "user_id", "status"),
        NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.QUEUED)
    trigger: Mapped[str] = mapped_column(String(16), default="message")
    iterations: Mapped[int] = mapped_column(default=0)
    # The how-many-th run of its conversation (0-based): the metering key's turn index.
    turn_index: Mapped[int] = mapped_column(default=0, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]


class QueuedMessage(Base):
    """A message the person sent while a run answered, to be sent when it ends
    (app/chat/queue.py): the oldest first, a few at most per conversation."""

    __tablename__ = "queued_messages"
    __table_args__ = (NEVER_REUSED_IDS,)

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    content: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ChatShare(Base):
    """A read-only link to a conversation's shown branch (app/chat/shares.py): only the
    token's SHA-256 digest is kept (the link is shown once, as an API token is). One live
    link per conversation: making a new one revokes the old."""

    __tablename__ = "chat_shares"
    __table_args__ = (NEVER_REUSED_IDS,)

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    token_digest: Mapped[str] = mapped_column(String(64), unique=True)
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class RunLogEntry(Base):
    """One structured event of a run (model call, tool call, frames, error), for
    `flask chat-logs` and the admin area. Secrets are redacted before they get here."""

    __tablename__ = "run_log_entries"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    conversation_id: Mapped[int] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    at: Mapped[datetime] = mapped_column(default=utcnow)
    kind: Mapped[str] = mapped_column(String(32))
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)


in_personal_project_by_default(Conversation)


@event.listens_for(Message.__table__, "after_create")
def _create_search_index(_table: Table, connection: Connection, **_kwargs: Any) -> None:
    """The full-text index lives beside the rows (app/chat/search_index.py)."""
    for statement in search_index.create_statements(connection.dialect.name):
        connection.exec_driver_sql(statement)


@event.listens_for(Message.__table__, "before_drop")
def _drop_search_index(_table: Table, connection: Connection, **_kwargs: Any) -> None:
    for statement in search_index.drop_statements(connection.dialect.name):
        connection.exec_driver_sql(statement)
