"""A chat's title: the fast model names it after its first exchange, unless the person did.

Until then the title is the first words of the first message (`app.chat.turns`). The run
that answered calls `propose_title` once it has ended (no transaction is open across the
model call): a structured call whose forced tool `submit_title` has a one-field schema.
The new title is written only if the person has not named the chat meanwhile, and the
person's conversation lists, chat headers and tab titles follow it live
(`ConversationChanged`). A failed proposal keeps the title it had and is tried again after
the next run (up to the chat's third).
"""

from __future__ import annotations

import logging

from sqlalchemy import select, update

from app.chat.conversations import conversation_dict
from app.chat.models import TITLE_DEFAULT, TITLE_MESSAGE, TITLE_MODEL, Conversation, Message, Run
from app.chat.run_services import RunServices
from app.db import read_transaction, rows_changed
from app.events import ConversationChanged
from app.kinds import RowKind
from app.llm.errors import ModelError, StreamCancelled
from app.llm.structured import Shape, StructuredOutputFailed, structured_call

log = logging.getLogger(__name__)

MAX_TITLE_CHARS = 60
# The chat's first runs only: a title that could not be made is not retried forever.
LAST_TURN_TRIED = 2
MESSAGE_CHARS = 2_000
ANSWER_CHARS = 1_000
REPLACEABLE = (TITLE_DEFAULT, TITLE_MESSAGE)

TITLE = Shape(
    "submit_title",
    "Give the chat's title as this tool's input.",
    {
        "type": "object",
        "properties": {
            "title": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_TITLE_CHARS,
                "description": "At most six words, in the language the person wrote in.",
            }
        },
        "required": ["title"],
        "additionalProperties": False,
    },
)

SYSTEM = (
    "You name chats in a creative-marketing workspace. Read the person's first message and "
    "the assistant's first answer, then give the chat a short title: at most six words, in "
    'the language the person wrote in, saying what the chat is about (e.g. "Ad copy for '
    'the coaching offer"). No quotes, no final full stop, no emoji. Give it as the input of '
    "the submit_title tool."
)


def propose_title(services: RunServices, conversation_id: int, user_id: int) -> str | None:
    """Name the chat after an answered run, if its title is still the placeholder or the
    first message's words; the new title (published to the person), or None. Never raises:
    a title is not worth a failed run."""
    if not services.settings.chat_titles:
        return None
    try:
        exchange = _first_exchange(services, conversation_id)
        if exchange is None:
            return None
        title = _ask_model(services, *exchange)
        if not title:
            return None
        changed = _store(services, conversation_id, title)
    except (ModelError, StructuredOutputFailed, StreamCancelled) as error:
        log.info("conversation %s: no title proposed: %s", conversation_id, error)
        return None
    except Exception:
        log.exception("conversation %s: proposing a title failed", conversation_id)
        return None
    if changed is not None:
        services.hub.publish_user(user_id, changed)
    return title if changed is not None else None


def _first_exchange(services: RunServices, conversation_id: int) -> tuple[str, str] | None:
    """(the person's first message, the assistant's first visible text), read in a read
    transaction that ends before the model is called; None when no title is wanted."""
    with services.database.session() as session, read_transaction(session):
        conversation = session.get(Conversation, conversation_id)
        if conversation is None or conversation.title_source not in REPLACEABLE:
            return None
        runs = session.scalar(
            select(Run.turn_index)
            .where(Run.conversation_id == conversation_id)
            .order_by(Run.turn_index.desc())
            .limit(1)
        )
        if runs is not None and runs > LAST_TURN_TRIED:
            return None
        rows = session.scalars(
            select(Message)
            .where(
                Message.conversation_id == conversation_id,
                Message.kind.in_((RowKind.USER, RowKind.HOST, RowKind.CARD)),
            )
            .order_by(Message.sequence)
            .limit(20)
        ).all()
    message = next((r.content for r in rows if r.kind == RowKind.USER and r.content.strip()), "")
    answer = next(
        (r.content for r in rows if r.role == "assistant" and not r.hidden and r.content.strip()),
        "",
    )
    if not message.strip():
        return None
    return message, answer


def _ask_model(services: RunServices, message: str, answer: str) -> str:
    parts = [f"## The person's first message\n{message[:MESSAGE_CHARS]}"]
    if answer.strip():
        parts.append(f"## The assistant's first answer\n{answer[:ANSWER_CHARS]}")
    data = structured_call(
        services.model,
        model_name=services.settings.fast_model,
        system=SYSTEM,
        messages=[{"role": "user", "content": "\n\n".join(parts)}],
        shape=TITLE,
        max_tokens=100,
    )
    return tidy_title(data["title"])


def tidy_title(title: str) -> str:
    """One line, without wrapping quotes or a final full stop, at most 60 characters."""
    title = " ".join(str(title).split()).strip("\"'“”‘’«»` ")
    title = title.removeprefix("Title:").strip().rstrip(".。")
    if len(title) > MAX_TITLE_CHARS:
        title = title[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return title


def _store(services: RunServices, conversation_id: int, title: str) -> ConversationChanged | None:
    """The title, unless the person named the chat while the model was thinking."""
    with services.database.session() as session:
        written = rows_changed(
            session.execute(
                update(Conversation)
                .where(
                    Conversation.id == conversation_id, Conversation.title_source.in_(REPLACEABLE)
                )
                .values(title=title, title_source=TITLE_MODEL)
            )
        )
        conversation = session.get(Conversation, conversation_id) if written else None
        changed = ConversationChanged(conversation_dict(conversation)) if conversation else None
        session.commit()
    return changed
