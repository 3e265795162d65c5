"""How a person keeps their chat list: pins, folders and the archive (no Flask here).

A pinned chat comes first in the sidebar; a folder is a name the person groups chats
under within a project (a chat is in one folder or none; the same name in two projects is
two folders, and a person in several projects sees the project beside the folder's name;
a chat moved to another project keeps its folder's name, filed under that project's
folder of that name); an archived chat leaves the list but stays
searchable and openable, and is restored from the Archived page. None of this moves a
chat's `updated_at`: organizing is not activity. Every change here is the caller's one
transaction; bulk changes lock their chats and change all of them or none."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.projects import member_projects, projects_of
from app.chat.models import Conversation
from app.chat.runs import lock_active_run, lock_conversation
from app.db import utcnow

FOLDER_MAX_CHARS = 60
MAX_BULK_IDS = 200
BulkAction = Literal["archive", "unarchive", "delete"]
BULK_ACTIONS: tuple[BulkAction, ...] = ("archive", "unarchive", "delete")


class FolderNameRefused(ValueError):
    """A folder name that cannot be kept; its message says why, in the person's words."""


def folder_name(value: str | None) -> str | None:
    """The folder as stored: trimmed, or None (no folder) for nothing but spaces. Raises
    FolderNameRefused for a control character or more than FOLDER_MAX_CHARS."""
    if value is None:
        return None
    if any(unicodedata.category(char) == "Cc" for char in value):
        raise FolderNameRefused("A folder name cannot hold control characters (tabs, new lines).")
    name = value.strip()
    if len(name) > FOLDER_MAX_CHARS:
        raise FolderNameRefused(f"A folder name can be at most {FOLDER_MAX_CHARS} characters.")
    return name or None


def set_pinned(conversation: Conversation, pinned: bool) -> None:
    if pinned and conversation.pinned_at is None:
        conversation.pinned_at = utcnow()
    elif not pinned:
        conversation.pinned_at = None


def set_archived(conversation: Conversation, archived: bool) -> None:
    if archived and conversation.archived_at is None:
        conversation.archived_at = utcnow()
    elif not archived:
        conversation.archived_at = None


def set_folder(conversation: Conversation, folder: str | None) -> None:
    """`folder` as `folder_name` gives it."""
    conversation.folder = folder


def listed_conversations(
    session: Session,
    user_id: int,
    *,
    archived: bool = False,
    folder: str | None = None,
    project_id: int | None = None,
) -> list[Conversation]:
    """The person's chats, newest activity first: those archived or those not; `folder`
    (when given) only those in it, "" only those in none; `project_id` (when given) only
    that project's. Only chats of projects the person is still a member of."""
    query = select(Conversation).where(
        Conversation.user_id == user_id,
        Conversation.project_id.in_(member_projects(user_id)),
    )
    if project_id is not None:
        query = query.where(Conversation.project_id == project_id)
    if archived:
        query = query.where(Conversation.archived_at.is_not(None))
    else:
        query = query.where(Conversation.archived_at.is_(None))
    if folder == "":
        query = query.where(Conversation.folder.is_(None))
    elif folder is not None:
        query = query.where(Conversation.folder == folder)
    query = query.order_by(Conversation.updated_at.desc(), Conversation.id.desc())
    return list(session.scalars(query))


def folder_names(session: Session, user_id: int, project_id: int) -> list[str]:
    """Every folder the person uses in the project (archived chats' too), in alphabetical
    order."""
    names = session.scalars(
        select(Conversation.folder)
        .where(
            Conversation.user_id == user_id,
            Conversation.project_id == project_id,
            Conversation.folder.is_not(None),
        )
        .distinct()
    )
    return sorted((name for name in names if name), key=str.casefold)


def project_names(session: Session, user_id: int) -> dict[int, str]:
    """The names the chat list shows beside a folder: {} for a person whose only project
    is their personal one (the list as it always was)."""
    projects = projects_of(session, user_id)
    if len(projects) <= 1:
        return {}
    return {project.id: "Personal" if project.personal else project.name for project, _ in projects}


def archived_count(session: Session, user_id: int) -> int:
    return (
        session.scalar(
            select(func.count())
            .select_from(Conversation)
            .where(Conversation.user_id == user_id, Conversation.archived_at.is_not(None))
        )
        or 0
    )


@dataclass
class FolderGroup:
    """A folder of a project, with its chats; `project_name` is shown beside its name
    for a person in several projects (None: not shown). Its list's `data-group` is
    `folder:<project_id>:<name>`, as its chats' items say (static/app.js compares them)."""

    name: str
    project_id: int
    project_name: str | None
    chats: list[Conversation] = field(default_factory=list)


@dataclass
class Sidebar:
    """The sidebar's groups: pinned chats (most recently pinned first), then each folder
    (alphabetical, then by project; a pinned chat shows only among the pinned), then the
    rest."""

    pinned: list[Conversation] = field(default_factory=list)
    folders: list[FolderGroup] = field(default_factory=list)
    recent: list[Conversation] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.pinned or self.folders or self.recent)


def sidebar_of(conversations: list[Conversation], names: dict[int, str] | None = None) -> Sidebar:
    """`conversations`: the unarchived ones, newest activity first; `names`: the
    projects' names to show beside their folders (none: not shown)."""
    names = names or {}
    sidebar = Sidebar()
    folders: dict[tuple[str, int], FolderGroup] = {}
    for conversation in conversations:
        if conversation.pinned_at is not None:
            sidebar.pinned.append(conversation)
        elif conversation.folder:
            key = (conversation.folder, conversation.project_id)
            if key not in folders:
                project_name = names.get(conversation.project_id)
                folders[key] = FolderGroup(
                    conversation.folder, conversation.project_id, project_name
                )
            folders[key].chats.append(conversation)
        else:
            sidebar.recent.append(conversation)
    sidebar.pinned.sort(key=lambda c: (c.pinned_at, c.id), reverse=True)
    sidebar.folders = sorted(
        folders.values(),
        key=lambda g: (g.name.casefold(), (g.project_name or "").casefold(), g.project_id),
    )
    return sidebar


def sidebar_context(session: Session, user_id: int) -> dict[str, object]:
    """What the chat list (templates/chat/_conversation_list.html) shows."""
    return {
        "sidebar": sidebar_of(
            listed_conversations(session, user_id), project_names(session, user_id)
        ),
        "archived_total": archived_count(session, user_id),
    }


class ChatsNotFound(LookupError):
    """One of the ids is not one of the person's chats (or none): nothing was changed."""

    def __init__(self, conversation_id: int):
        super().__init__(conversation_id)
        self.conversation_id = conversation_id


@dataclass(frozen=True)
class BulkDone:
    action: BulkAction
    ids: list[int]  # the chats acted on, in the order asked
    cancelled_runs: list[int]  # runs answering in deleted chats: to cut at once


def apply_bulk(session: Session, user_id: int, ids: list[int], action: BulkAction) -> BulkDone:
    """Archive, restore or delete the person's chats `ids`, all or none (raises
    ChatsNotFound before anything changes). A chat being answered is deleted as a single
    delete does it: its run is cancelled (the caller cuts its stream). The caller
    commits."""
    wanted = list(dict.fromkeys(ids))
    runs = []
    chats = []
    # In id order: two bulk requests over the same chats take their locks alike.
    for conversation_id in sorted(wanted):
        # The run before the chat, as a single delete takes them (app.chat.runs).
        run = lock_active_run(session, conversation_id) if action == "delete" else None
        conversation = lock_conversation(session, conversation_id)
        if conversation is None or conversation.user_id != user_id:
            raise ChatsNotFound(conversation_id)
        if run is not None:
            runs.append(run.id)
        chats.append(conversation)
    for conversation in chats:
        if action == "delete":
            session.delete(conversation)
        else:
            set_archived(conversation, action == "archive")
    session.flush()
    return BulkDone(action, wanted, runs)
