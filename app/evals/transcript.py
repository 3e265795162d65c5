"""What a case did, read back from the rows its runs persisted: every row, the tool calls
with their arguments and results, the cards shown and how they were answered, the outputs
saved and what the workspace holds before and after. The evaluators judge this, and it is
written to disk as JSON for a person to read."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.chat.models import Message, Run
from app.kinds import RowKind
from app.workspace.models import Output


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    result: Any = None
    is_error: bool = False
    answered: bool = False  # whether a result came back at all (a paused call has none yet)


@dataclass
class CardSeen:
    tool: str
    kind: str  # questionnaire or confirmation
    tool_use_id: str
    status: str
    title: str = ""
    answer: dict[str, Any] | None = None
    arguments: dict[str, Any] | None = None  # a confirmation: the held call's


@dataclass
class SavedOutput:
    id: int
    agent: str
    title: str
    offer_id: int | None
    content: dict[str, Any]


@dataclass
class Transcript:
    case: str
    messages: list[str]
    ids: dict[str, int]
    rows: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    cards: list[CardSeen] = field(default_factory=list)
    outputs: list[SavedOutput] = field(default_factory=list)
    references: list[SavedOutput] = field(default_factory=list)  # outputs the setup saved
    runs: list[str] = field(default_factory=list)  # each run's final status
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    writes: list[str] = field(default_factory=list)  # write tools the host's calls ran
    answer: str = ""  # the host's last text
    problems: list[str] = field(default_factory=list)  # why the case stopped early

    @property
    def host_text(self) -> str:
        return "\n\n".join(row["content"] for row in self.rows if row["kind"] == RowKind.HOST)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str, ensure_ascii=False)


def _result_value(block: dict[str, Any]) -> Any:
    content = block.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if isinstance(content, str):
        try:
            return json.loads(content)
        except ValueError:
            return content
    return content


def _calls(rows: list[Message]) -> list[ToolCall]:
    calls: dict[str, ToolCall] = {}
    for row in rows:
        for block in (row.meta or {}).get("blocks") or []:
            if block.get("type") == "tool_use":
                calls[block["id"]] = ToolCall(block["id"], block["name"], block.get("input") or {})
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in calls:
                call = calls[block["tool_use_id"]]
                call.result = _result_value(block)
                call.is_error = bool(block.get("is_error"))
                call.answered = True
    return list(calls.values())


def _cards(rows: list[Message]) -> list[CardSeen]:
    cards = []
    for row in rows:
        card = (row.meta or {}).get("card") if row.kind == RowKind.CARD else None
        if card:
            cards.append(
                CardSeen(
                    tool=card.get("tool", ""),
                    kind=card.get("kind", ""),
                    tool_use_id=card.get("toolUseId", ""),
                    status=card.get("status", ""),
                    title=card.get("title", ""),
                    answer=card.get("answer"),
                    arguments=card.get("arguments"),
                )
            )
    return cards


def _row(row: Message) -> dict[str, Any]:
    return {
        "sequence": row.sequence,
        "kind": row.kind,
        "hidden": row.hidden,
        "content": row.content,
        "meta": row.meta,
    }


def _saved(output: Output) -> SavedOutput:
    return SavedOutput(output.id, output.agent, output.title, output.offer_id, output.content)


def read_transcript(
    session: Session, transcript: Transcript, conversation_id: int, writing_tools: set[str]
) -> Transcript:
    """Fill `transcript` from the conversation's rows (every branch shown in order)."""
    rows = list(
        session.scalars(
            select(Message)
            .where(Message.conversation_id == conversation_id)
            .order_by(Message.sequence)
        )
    )
    transcript.rows = [_row(row) for row in rows]
    transcript.tool_calls = _calls(rows)
    transcript.cards = _cards(rows)
    transcript.writes = [
        call.name for call in transcript.tool_calls if call.name in writing_tools and ran(call)
    ]
    transcript.outputs = [
        _saved(output)
        for output in session.scalars(
            select(Output).where(Output.conversation_id == conversation_id).order_by(Output.id)
        )
    ]
    transcript.runs = list(
        session.scalars(
            select(Run.status).where(Run.conversation_id == conversation_id).order_by(Run.id)
        )
    )
    # A run that failed (the model refused the key, the endpoint was down) says so: without
    # this every check would fail for reasons that hide the cause.
    transcript.problems += [f"a run failed: {r.content}" for r in rows if r.kind == RowKind.ERROR]
    hosts = [row.content for row in rows if row.kind == RowKind.HOST and row.content.strip()]
    transcript.answer = hosts[-1] if hosts else ""
    return transcript


def ran(call: ToolCall) -> bool:
    """Whether the call was carried out: answered without an error, and not a card's
    closing answer (declined, or dismissed by a new message)."""
    if not call.answered or call.is_error:
        return False
    result = call.result
    closed = isinstance(result, dict) and (
        result.get("approved") is False or bool(result.get("dismissed"))
    )
    return not closed
