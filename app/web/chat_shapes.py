"""What `PATCH /api/chats/<id>` and `POST /api/chats/bulk` take and answer (the chat list's
pins, folders and archive: app/chat/organize.py), declared as app/web/shapes.py declares
the rest: each body both parses the request and is its schema."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from app.chat.organize import FOLDER_MAX_CHARS, MAX_BULK_IDS, BulkAction, folder_name
from app.web.shapes import NOT_BLANK, Body, ProjectId, _integral


def _folder(value: str | None) -> str | None:
    try:
        return folder_name(value)
    except ValueError as refused:
        raise PydanticCustomError("folder", str(refused).rstrip(".")) from None


# A folder's name: at most 60 characters, no control characters; trimmed, and nothing but
# spaces (or null) means no folder. (The pattern is for the document: Python's `$` would
# let a trailing newline through, so the validator checks.)
FOLDER_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
FolderName = Annotated[
    Annotated[
        str,
        Field(
            max_length=FOLDER_MAX_CHARS,
            json_schema_extra={"pattern": FOLDER_PATTERN},
        ),
    ]
    | None,
    AfterValidator(_folder),
]
ChatTitle = Annotated[str, Field(max_length=120, pattern=NOT_BLANK)]


class ChatPatch(Body):
    """Any of these; a field left out keeps its value (`model_fields_set` says which were
    sent). Only `folder` (out of its folder) and `model` (the default) take null: the None
    defaults of the others are never read, and a null sent for them is refused by their
    type."""

    title: ChatTitle = Field(None)  # type: ignore[assignment]
    folder: FolderName = None
    pinned: bool = Field(None, description="Pin it to the top of the sidebar, or unpin it")  # type: ignore[assignment]
    archived: bool = Field(None, description="Archive it (out of the list), or restore it")  # type: ignore[assignment]
    project_id: ProjectId = Field(  # type: ignore[assignment]
        None, description="Work in this project of yours from the next run on"
    )
    model: str | None = Field(
        None,
        max_length=100,
        description="Answer with this model (GET /api/models) from the next request on; null:"
        " the default",
    )


class ChatsBulk(Body):
    ids: list[Annotated[int, Field(ge=1, le=2**31 - 1), BeforeValidator(_integral)]] = Field(
        min_length=1, max_length=MAX_BULK_IDS, description="Your chats' ids"
    )
    action: BulkAction = Field(description="What to do with every one of them")


class ChatsBulkDone(BaseModel):
    action: BulkAction
    ids: list[int] = Field(description="The chats it was done to")
