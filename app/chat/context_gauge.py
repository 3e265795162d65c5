"""How full the model's context window is for a chat's next call, and what its last turn
cost: the chat header's gauge and `GET /api/chats/<id>/context`.

The numbers are the request builder's own (`HostRequestBuilder.draft`, app/llm/budget.py):
the same history, system prompt, tools and reserved output the next run's first call
would draft, read in one read transaction, so the gauge follows whatever the builder does
(a chat's model, its window and thinking budget) without estimating anything again.
Drafting is the cost of a run's first read; a gauge asked again for the same chat state
(every open tab, after every run) is answered from a small cache."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.billing.models import UsageEvent
from app.chat.context_window import Draft, HostRequestBuilder
from app.chat.loop import AUTO
from app.chat.model_choice import ChosenModel, chosen_model
from app.chat.models import Conversation, Message
from app.chat.run_services import RunServices
from app.chat.toolset import run_tools
from app.db import read_transaction


@dataclass(frozen=True)
class Gauge:
    """What the next call holds, in estimated tokens (the builder's, calibrated)."""

    window: int  # the model's window: input and reserved output
    history: int  # the conversation's messages, before any fitting
    system_and_tools: int  # the system prompt (instructions, memory, summary) and tool schemas
    reserved_output: int  # max_tokens: the answer's room, thinking included when on
    last_turn_credits: int | None  # what the chat's last run cost; None before any

    @classmethod
    def of(cls, draft: Draft, last_turn_credits: int | None) -> Gauge:
        return cls(
            window=draft.window,
            history=draft.history_tokens,
            system_and_tools=draft.fixed,
            reserved_output=int(draft.request["max_tokens"]),
            last_turn_credits=last_turn_credits,
        )

    @property
    def used(self) -> int:
        return self.history + self.system_and_tools + self.reserved_output

    @property
    def percent(self) -> int:
        """Of the window, at most 100 (a history over it is compacted by the next call)."""
        return min(100, round(self.used * 100 / self.window)) if self.window > 0 else 100

    @property
    def label(self) -> str:
        """ "Context 34% · 68k of 200k"."""
        shown = min(self.used, self.window)
        return f"Context {self.percent}% · {tokens(shown)} of {tokens(self.window)}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "used": self.used, "percent": self.percent, "label": self.label}


def tokens(count: int) -> str:
    """A token count as people read it: 950, 1.5k, 68k, 1.2M."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}".removesuffix(".0") + "M"
    if count >= 10_000:
        return f"{round(count / 1_000)}k"
    if count >= 1_000:
        return f"{count / 1_000:.1f}".removesuffix(".0") + "k"
    return str(count)


# (chat, last sequence, summary's reach, tool phase, last usage event, calibration factor,
# the model it answers with: a pick, or an admin's change of the default or its window)
GaugeKey = tuple[int, int | None, int, str, int | None, float, ChosenModel]


class GaugeCache:
    """Gauges by chat state: the chat, its last row, its summary's reach, its last usage
    event, the calibration of its estimates and its model. Any change to those is a new key; what it
    does not see (a memory edited, an MCP server added) shows from the next row on."""

    def __init__(self, size: int = 512):
        self._gauges: OrderedDict[GaugeKey, Gauge] = OrderedDict()
        self._lock = threading.Lock()
        self._size = size

    def get(self, key: GaugeKey) -> Gauge | None:
        with self._lock:
            gauge = self._gauges.get(key)
            if gauge is not None:
                self._gauges.move_to_end(key)
            return gauge

    def put(self, key: GaugeKey, gauge: Gauge) -> None:
        with self._lock:
            self._gauges[key] = gauge
            self._gauges.move_to_end(key)
            while len(self._gauges) > self._size:
                self._gauges.popitem(last=False)


def context_gauge(services: RunServices, conversation_id: int, cache: GaugeCache) -> Gauge | None:
    """The chat's gauge now (None when the chat is gone), read in one read transaction."""
    with services.database.session() as session, read_transaction(session):
        conversation = session.get(Conversation, conversation_id)
        if conversation is None:
            return None
        last_sequence, usage = _state(session, conversation_id)
        key: GaugeKey = (
            conversation_id,
            last_sequence,
            conversation.summarized_up_to_sequence,
            conversation.tool_phase,
            usage[0] if usage else None,
            services.calibration.factor(conversation_id),
            chosen_model(session, services.settings, conversation),
        )
        cached = cache.get(key)
        if cached is not None:
            return cached
        registry = run_tools(session, services, conversation.user_id)
        builder = HostRequestBuilder(services, conversation_id, services.calibration, registry)
        draft = builder.draft(session, AUTO, False)
    gauge = Gauge.of(draft, usage[1] if usage else None)
    cache.put(key, gauge)
    return gauge


def _state(session: Session, conversation_id: int) -> tuple[int | None, tuple[int, int] | None]:
    """The chat's last sequence, and its last usage event's (id, credits)."""
    last_sequence = session.scalar(
        select(func.max(Message.sequence)).where(Message.conversation_id == conversation_id)
    )
    usage = session.execute(
        select(UsageEvent.id, UsageEvent.credits)
        .where(UsageEvent.conversation_id == conversation_id)
        .order_by(UsageEvent.id.desc())
        .limit(1)
    ).first()
    return last_sequence, (usage[0], usage[1]) if usage else None
