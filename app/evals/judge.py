"""The rubric judge: a model reads a case's transcript and says whether it meets a rubric,
and why. It asks through the app's own structured call (app/llm/structured.py), so it goes
over HTTP through the real anthropic SDK to the configured endpoint: with a real key a real
model grades; in the tests the fake model server answers it like any other request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from app.evals.transcript import Transcript
from app.kinds import RowKind
from app.llm.client import ModelClient
from app.llm.structured import Shape, structured_call

GRADE = Shape(
    tool_name="submit_grade",
    description="Your verdict on whether the assistant's conversation meets the rubric.",
    schema={
        "type": "object",
        "properties": {
            "reason": {
                "type": "string",
                "description": "What in the transcript decides it, quoted where you can.",
            },
            "passed": {"type": "boolean", "description": "true when the rubric is met"},
        },
        "required": ["reason", "passed"],
        "additionalProperties": False,
    },
)

SYSTEM = """You grade one conversation between a person and an AI marketing assistant \
(Loopdesk) against a rubric. The transcript shows what the person wrote, what the assistant \
wrote, every tool it called with the arguments it sent and what came back, the question \
cards it showed and how they were answered, and any outputs it saved. Judge only what the \
transcript shows; do not reward intentions the assistant only stated. Quote the parts that \
decide your verdict, then call submit_grade."""

RESULT_CHARS = 1500  # of each tool result: enough to judge, short of flooding the judge


@dataclass(frozen=True)
class Judge:
    model: ModelClient
    model_name: str
    max_tokens: int = 1024

    def grade(self, rubric: str, transcript: Transcript) -> tuple[bool, str]:
        answer = structured_call(
            self.model,
            model_name=self.model_name,
            system=SYSTEM,
            messages=[{"role": "user", "content": judge_prompt(rubric, transcript)}],
            shape=GRADE,
            max_tokens=self.max_tokens,
        )
        return bool(answer["passed"]), str(answer["reason"])


_current: list[Judge] = []


@contextmanager
def judging_with(judge: Judge) -> Iterator[None]:
    """The judge the Rubric evaluators ask while the block runs (one eval per process)."""
    _current.append(judge)
    try:
        yield
    finally:
        _current.remove(judge)


def current_judge() -> Judge:
    if not _current:
        raise RuntimeError("no judge: Rubric evaluators run inside `judging_with`")
    return _current[-1]


def _shown(value: Any, limit: int | None = None) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if limit is None or len(text) <= limit else text[:limit] + " …(cut)"


def judge_prompt(rubric: str, transcript: Transcript) -> str:
    return (
        f"<rubric>\n{rubric.strip()}\n</rubric>\n"
        f"<transcript>\n{transcript_text(transcript)}\n</transcript>"
    )


def transcript_text(transcript: Transcript) -> str:
    """The transcript as a person (or the judge) reads it: the turns in order, tool calls
    and results, cards and answers, the outputs already saved and those saved here."""
    parts: list[str] = []
    for saved in transcript.references:
        parts.append(f"[already saved output #{saved.id}, {saved.agent}: {saved.title}]")
        parts.append(_shown(saved.content))
    calls = {call.id: call for call in transcript.tool_calls}
    for row in transcript.rows:
        parts.extend(_row_lines(row, calls))
    for output in transcript.outputs:
        parts.append(f"[output saved in this chat #{output.id}, {output.agent}: {output.title}]")
        parts.append(_shown(output.content))
    return "\n".join(parts)


def _row_lines(row: dict[str, Any], calls: dict[str, Any]) -> list[str]:
    kind, meta = row["kind"], row.get("meta") or {}
    lines: list[str] = []
    if kind == RowKind.USER:
        files = ", ".join(str(f.get("filename")) for f in meta.get("files") or [])
        lines.append(f"PERSON: {row['content']}" + (f" [attached: {files}]" if files else ""))
    elif kind in (RowKind.HOST, RowKind.CARD) and row["content"].strip():
        lines.append(f"ASSISTANT: {row['content']}")
    for block in meta.get("blocks") or []:
        if block.get("type") == "tool_use":
            lines.append(f"TOOL CALL {block['name']} {_shown(block.get('input') or {})}")
        elif block.get("type") == "tool_result" and block.get("tool_use_id") in calls:
            call = calls[block["tool_use_id"]]
            flag = " (error)" if call.is_error else ""
            lines.append(f"TOOL RESULT {call.name}{flag}: {_shown(call.result, RESULT_CHARS)}")
    card = meta.get("card") if kind == RowKind.CARD else None
    if card:
        asked = card.get("title") or card.get("tool")
        lines.append(f"CARD ({card.get('kind')}, {card.get('tool')}): {asked}")
        if card.get("answer") is not None:
            lines.append(f"PERSON ANSWERED THE CARD: {_shown(card['answer'])}")
    return lines
