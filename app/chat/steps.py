"""A run's steps, kept after it ends: what the live timeline showed, as a collapsed
"N steps" summary beside the run's first row.

The loop records every tool call it makes (in plain words, from the tool's declared
`label`; an agent's or build tool's saved result and a made image by id) and the first
row the run showed. When the run ends the summary is stored in that row's `meta["steps"]`
(in the transaction that finishes the run, when it finishes normally), so a reload renders
it from the row like everything else, whether or not run logs are kept. The row is then
pushed again, so open pages show the summary as the live timeline goes.

Stored (and shown by the API as the row's `steps`):
`{"runId", "ms", "items": [{"tool", "label", "ms", "ok", "outputId"?, "assetId"?}]}`.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy.orm import Session

from app.chat.models import Message
from app.chat.runs import lock_conversation
from app.chat.shapes import is_confirmation
from app.kinds import RowKind
from app.row_meta import Step, StepsSummary, output_in
from app.tools.registry import ToolRegistry
from app.tools.results import ToolResult

# The rows a run shows that can carry its summary (not notices, not the person's rows).
ANCHOR_KINDS = (RowKind.HOST, RowKind.CARD, RowKind.AGENT_OUTPUT, RowKind.ERROR)


class RunSteps:
    def __init__(self, run_id: int, tools: ToolRegistry):
        self.run_id = run_id
        self.tools = tools
        self.started = time.monotonic()
        self.items: list[Step] = []
        self.anchor_id: int | None = None
        self.kept = False

    def row_shown(self, row: dict[str, Any]) -> None:
        if self.anchor_id is None and row.get("kind") in ANCHOR_KINDS:
            self.anchor_id = row["id"]

    def tool_call(self, name: str, result: ToolResult, ms: int) -> None:
        tool = self.tools.get(name)
        label = tool.step_label if tool is not None else f"Tried a tool named {name}"
        step = Step(tool=name, label=label, ms=ms, ok=not result.is_error)
        content = result.content
        card = content.get("card shown") if isinstance(content, dict) else None
        if is_confirmation(card):
            step["label"] = f"Asked you to confirm: {label[:1].lower()}{label[1:]}"
        for row in result.visible_rows:
            shown = output_in(row.get("meta"))
            if shown is None:
                continue
            if isinstance(shown.get("outputId"), int):
                step["outputId"] = shown["outputId"]
            if isinstance(shown.get("assetId"), int):
                step["assetId"] = shown["assetId"]
        self.items.append(step)

    def summary(self) -> StepsSummary:
        return StepsSummary(
            runId=self.run_id,
            ms=int((time.monotonic() - self.started) * 1000),
            items=list(self.items),
        )

    def keep(self, session: Session, conversation_id: int) -> Message | None:
        """Store the summary on the run's first shown row, in the caller's transaction;
        the row (to push again), or None when there is nothing to keep or nowhere to keep
        it. The conversation is locked first, so an answer to the card the row may hold
        (which locks it too) is never overwritten with the card's older state."""
        if self.kept or not self.items or self.anchor_id is None:
            return None
        if lock_conversation(session, conversation_id) is None:
            return None
        row = session.get(Message, self.anchor_id)
        if row is None:
            return None
        row.meta = {**row.meta, "steps": self.summary()}
        self.kept = True
        return row
