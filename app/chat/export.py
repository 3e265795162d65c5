"""A conversation taken out: as Markdown a person reads, and as JSON a script reads.

Both show what the chat page shows (the shown branch's visible rows, never hidden ones),
with each attachment on the person's message it went with. No Flask here: the answered
summary of a card comes from the caller (the web layer knows how cards read).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.chat.branches import shown_rows
from app.chat.conversations import conversation_dict
from app.chat.markdown_safety import markdown_block, markdown_inline
from app.chat.models import Conversation
from app.chat.shapes import is_confirmation
from app.kinds import CardStatus, RowKind
from app.row_meta import AgentOutput, Card, card_in, output_in
from app.workspace.models import Attachment

FORMATS = ("md", "json")
CardSummary = Callable[[Card], list[dict[str, Any]]]  # [{"title", "answers": [label, ...]}]


@dataclass(frozen=True)
class ConversationExport:
    chat: dict[str, Any]
    rows: list[dict[str, Any]]
    attachments: list[dict[str, Any]]

    def as_json(self) -> dict[str, Any]:
        return {"chat": self.chat, "messages": self.rows, "attachments": self.attachments}

    def as_markdown(self, card_summary: CardSummary) -> str:
        lines = [f"# {markdown_inline(self.chat['title'])}", ""]
        for row in self.rows:
            lines.extend(_row_markdown(row, card_summary))
            for attachment in self.attachments:
                if attachment["message_sequence"] == row["sequence"]:
                    name = markdown_inline(attachment["filename"])
                    lines.append(f"*Attached: {name} ({attachment['size']} bytes)*")
                    lines.append("")
        return "\n".join(lines).rstrip() + "\n"


def export_conversation(session: Session, conversation: Conversation) -> ConversationExport:
    rows = shown_rows(session, conversation)
    attachments = session.scalars(
        select(Attachment)
        .where(Attachment.conversation_id == conversation.id)
        .order_by(Attachment.id)
    ).all()
    person_rows = [row["sequence"] for row in rows if row["kind"] == RowKind.USER]
    return ConversationExport(
        conversation_dict(conversation),
        rows,
        [_attachment_dict(a, person_rows) for a in attachments],
    )


def _attachment_dict(attachment: Attachment, person_rows: list[int]) -> dict[str, Any]:
    """`message_sequence`: the person's message it was sent with (None: not sent yet)."""
    sent_with = next((seq for seq in person_rows if seq > attachment.after_sequence), None)
    return {
        "id": attachment.id,
        "filename": attachment.filename,
        "content_type": attachment.content_type,
        "size": attachment.size,
        "message_sequence": sent_with,
        "created_at": attachment.created_at.isoformat() + "Z",
    }


def _row_markdown(row: dict[str, Any], card_summary: CardSummary) -> list[str]:
    when = row["created_at"].replace("T", " ")[:16] + " UTC"
    who = "You" if row["kind"] == RowKind.USER else "Loopdesk"
    lines = [f"## {who} · {when}", ""]
    if row.get("content"):
        lines.extend([markdown_block(row["content"]), ""])
    card, output = card_in(row), output_in(row)  # a row's dict carries them as its meta
    if card is not None:
        lines.extend(_card_markdown(card, card_summary))
    if output is not None:
        lines.extend(_output_markdown(output))
    if row.get("stopped"):
        lines.extend(["*Stopped*", ""])
    return lines


def _card_markdown(card: Card, card_summary: CardSummary) -> list[str]:
    lines = [f"> **{markdown_inline(card.get('title') or 'A question for you')}**"]
    if is_confirmation(card):
        answer = card.get("answer") or {}
        lines.append(">")
        lines.append(f"> {markdown_inline(card.get('reason', ''))}".rstrip())
        approved = answer.get("approved")
        verdict = (
            "Allowed" if approved is True else "Declined" if approved is False else "Not answered"
        )
        lines.extend([">", f"> Answer: {verdict}", ""])
        return lines
    for item in card_summary(card):
        answers = ", ".join(markdown_inline(answer) for answer in item["answers"]) or "No answer"
        lines.append(f"> - {markdown_inline(item['title'])}: {answers}")
    if card.get("status") == CardStatus.AWAITING:
        lines.append("> - (waiting for an answer)")
    elif card.get("status") == CardStatus.DISMISSED:
        lines.append("> - (skipped)")
    lines.append("")
    return lines


def _output_markdown(output: AgentOutput) -> list[str]:
    name = markdown_inline(output.get("agentName") or output.get("agent") or "Result")
    lines = [f"### {name}: {markdown_inline(output.get('title', ''))}".rstrip(), ""]
    lines.extend(_value_markdown(output.get("content"), 0))
    lines.append("")
    return lines


def _value_markdown(value: Any, depth: int) -> list[str]:
    indent = "  " * depth
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            label = markdown_inline(str(key).replace("_", " "))
            if isinstance(item, (dict, list)):
                lines.append(f"{indent}- **{label}**:")
                lines.extend(_value_markdown(item, depth + 1))
            else:
                lines.extend(_scalar_markdown(f"{indent}- **{label}**: ", item, indent))
        return lines
    if isinstance(value, list):
        lines = []
        for item in value:
            if isinstance(item, (dict, list)):
                lines.append(f"{indent}-")
                lines.extend(_value_markdown(item, depth + 1))
            else:
                lines.extend(_scalar_markdown(f"{indent}- ", item, indent))
        return lines
    if value in (None, ""):
        return []
    return [f"{indent}{line}".rstrip() for line in markdown_block(str(value)).split("\n")]


def _scalar_markdown(lead: str, value: Any, indent: str) -> list[str]:
    """A value after its list marker: on the line when it is one line once made safe,
    else as a block inside the list item (a model's text, so made safe either way)."""
    block = markdown_block(str(value))
    if "\n" not in block:
        return [f"{lead}{block}".rstrip()]
    return [lead.rstrip(), *(f"{indent}  {line}".rstrip() for line in block.split("\n"))]
