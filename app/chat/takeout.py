"""Everything of one person's in one zip: every chat (Markdown and JSON), every output,
asset, attachment and workspace record, their memory, their own presets and their
scheduled messages.

Built without holding the database: each chat, and each table, is read in its own short
read transaction (DEFERRED on SQLite: it never takes or waits for the write lock), and
the zip is written between them, into a temporary file rather than memory. What it may
hold is capped (before compression): data over the cap is refused before the zip is
begun when the person's files alone pass it, else as soon as the zip does.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from collections.abc import Iterable
from typing import IO, Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.accounts.projects import member_projects, owned_projects
from app.chat.export import CardSummary, export_conversation
from app.chat.models import Conversation
from app.chat.preset_models import Preset
from app.chat.schedule_models import ChatSchedule
from app.db import Database, read_transaction
from app.memory.models import UserMemory
from app.workspace.attachments import human_size, safe_filename
from app.workspace.models import (
    Attachment,
    Campaign,
    Character,
    Offer,
    Output,
    Persona,
    VisualAsset,
)

IN_MEMORY_BYTES = 8 * 1024 * 1024  # beyond this the archive spills to a temporary file
IMAGE_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}
WORKSPACE = {
    "offers": Offer,
    "personas": Persona,
    "characters": Character,
    "campaigns": Campaign,
    "outputs": Output,
}


class ArchiveTooLarge(Exception):
    def __init__(self, max_bytes: int):
        super().__init__(
            f"Your data is too large to download at once: a download holds at most "
            f"{human_size(max_bytes)}. Delete some attachments or images, or ask the operator to "
            "raise DATA_DOWNLOAD_MAX_BYTES."
        )


class _CappedZip:
    """A zip that refuses an entry taking it past `max_bytes` (uncompressed)."""

    def __init__(self, z: zipfile.ZipFile, max_bytes: int):
        self.z, self.max_bytes, self.left = z, max_bytes, max_bytes

    def writestr(self, name: str, data: str | bytes) -> None:
        data = data.encode() if isinstance(data, str) else data
        self.left -= len(data)
        if self.left < 0:
            raise ArchiveTooLarge(self.max_bytes)
        self.z.writestr(name, data)


def file_bytes(session: Session, user_id: int) -> int:
    """What the person's attachments and images hold: most of a zip, known at once."""
    with read_transaction(session):
        attachments = session.scalar(
            select(func.coalesce(func.sum(Attachment.size), 0)).where(Attachment.user_id == user_id)
        )
        assets = session.scalar(
            select(func.coalesce(func.sum(func.length(VisualAsset.data)), 0)).where(
                VisualAsset.project_id.in_(owned_projects(user_id))
            )
        )
    return int(attachments or 0) + int(assets or 0)


def build_archive(
    database: Database, user_id: int, card_summary: CardSummary, max_bytes: int
) -> IO[bytes]:
    """The person's data as a zip, rewound and ready to send. Raises ArchiveTooLarge."""
    with database.session() as session:
        if file_bytes(session, user_id) > max_bytes:
            raise ArchiveTooLarge(max_bytes)
    # Handed to the response, which closes it once sent.
    archive = tempfile.SpooledTemporaryFile(max_size=IN_MEMORY_BYTES)  # noqa: SIM115
    try:
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            _write_all(database, _CappedZip(z, max_bytes), user_id, card_summary)
    except BaseException:
        archive.close()
        raise
    archive.seek(0)
    return archive


def _write_all(database: Database, z: _CappedZip, user_id: int, card_summary: CardSummary) -> None:
    with database.session() as session:
        for chat_id in _ids(
            session,
            select(Conversation.id).where(
                Conversation.user_id == user_id,
                Conversation.project_id.in_(member_projects(user_id)),
            ),
        ):
            with read_transaction(session):
                exported = export_conversation(session, session.get_one(Conversation, chat_id))
            z.writestr(f"chats/{chat_id}.md", exported.as_markdown(card_summary))
            z.writestr(f"chats/{chat_id}.json", _json(exported.as_json()))
            session.expunge_all()
        for name, model in WORKSPACE.items():
            with read_transaction(session):
                records = [_record(item) for item in _owned(session, model, user_id)]
            z.writestr(f"{name}.json", _json(records))
        _write_files(session, z, user_id)
        with read_transaction(session):
            memory = session.get(UserMemory, user_id)
            facts = {
                "instructions": memory.instructions if memory else "",
                "facts": memory.facts if memory else [],
            }
        z.writestr("memory.json", _json(facts))
        with read_transaction(session):
            own = select(Preset).where(Preset.user_id == user_id).order_by(Preset.id)
            presets = [_record(preset) for preset in session.scalars(own)]
        z.writestr("presets.json", _json(presets))
        with read_transaction(session):
            theirs = select(ChatSchedule).where(ChatSchedule.user_id == user_id)
            schedules = [_record(item) for item in session.scalars(theirs.order_by("id"))]
        z.writestr("schedules.json", _json(schedules))


def _write_files(session: Session, z: _CappedZip, user_id: int) -> None:
    """Assets and attachments one at a time: their bytes are the largest part."""
    assets = []
    in_owned = VisualAsset.project_id.in_(owned_projects(user_id))
    for asset_id in _ids(session, select(VisualAsset.id).where(in_owned)):
        with read_transaction(session):
            asset = session.get_one(VisualAsset, asset_id)
            record = _record(asset, skip=("data",))
            data = asset.data
        if data:
            extension = IMAGE_EXTENSIONS.get(asset.content_type, "bin")
            record["file"] = f"assets/{asset_id}.{extension}"
            z.writestr(record["file"], data)
        assets.append(record)
        session.expunge_all()
    z.writestr("assets.json", _json(assets))
    attachments = []
    for attachment_id in _ids(session, select(Attachment.id).where(Attachment.user_id == user_id)):
        with read_transaction(session):
            attachment = session.get_one(Attachment, attachment_id)
            record = _record(attachment, skip=("data", "text"))
            data = attachment.data
        record["file"] = f"attachments/{attachment_id}-{safe_filename(attachment.filename)}"
        z.writestr(record["file"], data)
        attachments.append(record)
        session.expunge_all()
    z.writestr("attachments.json", _json(attachments))


def _ids(session: Session, query: Select[Any]) -> list[int]:
    with read_transaction(session):
        return list(session.scalars(query.order_by(query.selected_columns[0])))


def _owned(session: Session, model: Any, user_id: int) -> Iterable[Any]:
    """The workspace rows of the projects the person owns (their personal one, and any
    they made or were made an owner of): an editor's or viewer's export leaves another
    owner's workspace out."""
    query = select(model).where(model.project_id.in_(owned_projects(user_id)))
    return session.scalars(query.order_by(model.id))


def _record(item: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    values = {}
    for column in item.__table__.columns:
        if column.key in skip:
            continue
        value = getattr(item, column.key)
        values[column.key] = value.isoformat() + "Z" if hasattr(value, "isoformat") else value
    return values


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
