"""Preparing one host request so that it fits the model's window, compacting the
conversation first when its history does not."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.accounts.projects import project_note
from app.chat.compaction import Summarizer, rows_to_compact, save_summary
from app.chat.fitting import fit_messages
from app.chat.history import (
    cap_messages,
    continuing_tool_loop_without_thinking,
    load_tail,
    merge_rows,
    repair,
)
from app.chat.model_choice import ChosenModel, chosen_model
from app.chat.models import Conversation, Message
from app.chat.offered_models import HOST_MAX_TOKENS
from app.chat.presets import chat_preset, preset_groups, preset_prompt
from app.chat.prompt import build_system_prompt
from app.chat.toolset import tools_for_step
from app.db import read_transaction
from app.llm.budget import (
    Calibration,
    estimate_messages,
    estimate_text,
    estimate_tools,
    input_budget,
)
from app.llm.web_search import TOOL as WEB_SEARCH_TOOL
from app.memory.store import memory_prompt, read_memory
from app.tools.groups import WEB_SEARCH
from app.tools.registry import ToolRegistry

COMPACT_THRESHOLD = 0.85  # of the input budget
RECENT_FRACTION = 0.5  # the recent window's share of the input budget
VERIFY_FRACTION = 0.9  # above this share, ask the API to count
WRAP_UP_NOTE = "You have used every tool call this turn allows. Answer the person now."


@dataclass
class PreparedRequest:
    request: dict[str, Any]
    estimated_input: int
    notices: list[Message] = field(default_factory=list)


@dataclass
class HostRequestBuilder:
    services: Any
    conversation_id: int
    calibration: Calibration
    # The run's tools (the process's own and the person's MCP servers'); None: the
    # process's own.
    registry: ToolRegistry | None = None

    def prepare(
        self,
        tool_choice: dict[str, Any],
        wrap_up: bool,
        harder: bool = False,
        draft: Draft | None = None,
    ) -> PreparedRequest:
        """The request, fitted to the window. `draft`: its first draft, when the caller read
        it already in a transaction of its own (`draft`)."""
        notices: list[Message] = []
        draft = draft or self._draft(tool_choice, wrap_up)
        threshold = 0.5 if harder else COMPACT_THRESHOLD
        if draft.history_tokens > draft.budget * threshold:
            recent = int(draft.budget * RECENT_FRACTION * (0.5 if harder else 1))
            notice = self._compact(draft.tail, recent)
            if notice is not None:
                notices.append(notice)
                draft = self._draft(tool_choice, wrap_up)
        prepared = draft.finish(notices)
        if prepared.estimated_input > draft.budget * VERIFY_FRACTION:
            counted = self.services.model.count_tokens(prepared.request)
            if counted is not None and counted > draft.budget:
                shrink = draft.budget / counted
                prepared = draft.finish(notices, shrink=shrink * 0.95)
        return prepared

    def _draft(self, tool_choice: dict[str, Any], wrap_up: bool) -> Draft:
        with self.services.database.session() as session, read_transaction(session):
            return self.draft(session, tool_choice, wrap_up)

    def draft(
        self,
        session: Session,
        tool_choice: dict[str, Any],
        wrap_up: bool,
        memory: tuple[str, list[str]] | None = None,
    ) -> Draft:
        """The request before it is fitted, read in the caller's transaction (the loop reads
        it with what else it reads or writes before the model call). `memory`: the
        person's instructions and facts, when the caller read them already."""
        settings = self.services.settings
        conversation = session.get_one(Conversation, self.conversation_id)
        tools, groups, system = self._tools_and_system(session, conversation, wrap_up, memory)
        tail = load_tail(session, conversation, settings.history_message_cap)
        summarized_up_to = conversation.summarized_up_to_sequence
        # The chat's model: its window and thinking budget set the numbers below.
        model = chosen_model(session, settings, conversation)
        keep_thinking = model.thinking_budget > 0
        messages = repair(
            cap_messages(repair(merge_rows(tail), keep_thinking), settings.history_message_cap),
            keep_thinking,
        )
        thinking = keep_thinking and not continuing_tool_loop_without_thinking(messages)
        # A step with thinking off reserves no thinking budget.
        max_tokens = HOST_MAX_TOKENS + (model.thinking_budget if thinking else 0)
        schemas = [tool.schema_for_model() for tool in tools]
        if settings.offers_web_search and (groups is None or WEB_SEARCH.key in groups):
            schemas.append(WEB_SEARCH_TOOL)  # the provider's, run within its reply
        factor = self.calibration.factor(self.conversation_id)
        fixed = math.ceil((estimate_tools(schemas) + estimate_text(system)) * factor)
        budget = input_budget(model.window, max_tokens, fixed, 0)
        request = {
            "model": model.name,
            "max_tokens": max_tokens,
            "system": system,
            "tools": schemas,
            "tool_choice": tool_choice,
        }
        if thinking:
            request["thinking"] = {"type": "enabled", "budget_tokens": model.thinking_budget}
        return Draft(
            request=request,
            messages=messages,
            tail=tail,
            window=model.window,
            budget=budget,
            fixed=fixed,
            factor=factor,
            summarized_up_to=summarized_up_to,
            history_tokens=math.ceil(estimate_messages(messages) * factor),
            model=model,
        )

    def _tools_and_system(
        self,
        session: Session,
        conversation: Conversation,
        wrap_up: bool,
        memory: tuple[str, list[str]] | None,
    ) -> tuple[list[Any], frozenset[str] | None, str]:
        """The tools offered at this step (only the preset's groups, when it has one) and
        the system prompt that describes them."""
        note, several = project_note(session, conversation.user_id, conversation.project_id)
        # select_project is offered while a person in several projects never chose one.
        asks = several and not conversation.project_chosen
        preset = chat_preset(session, conversation)
        groups = preset_groups(preset)
        registry = self.registry or self.services.tools
        tools = tools_for_step(registry, conversation.tool_phase, asks, groups)
        instructions, facts = memory or read_memory(session, conversation.user_id)
        about = memory_prompt(instructions, facts)
        system = build_system_prompt(conversation, tools, about, note, preset_prompt(preset))
        if wrap_up:
            system = f"{system}\n\n{WRAP_UP_NOTE}"
        return tools, groups, system

    def _compact(self, tail: list[Message], recent_budget: int) -> Message | None:
        settings = self.services.settings
        with self.services.database.session() as session:
            conversation = session.get(Conversation, self.conversation_id)
            covered_before = conversation.summarized_up_to_sequence
            summary = conversation.summary
            older = rows_to_compact(session, conversation, tail, recent_budget)
        if not older:
            return None
        # The summary call runs outside any transaction: it can take a while.
        summarizer = Summarizer(
            self.services.model, settings.fast_model, settings.context_window_tokens
        )
        new_summary = summarizer.update(summary, older)
        with self.services.database.session() as session:
            notice = save_summary(
                session, self.conversation_id, covered_before, older[-1].sequence, new_summary
            )
            session.commit()
        return notice


@dataclass
class Draft:
    request: dict[str, Any]
    messages: list[dict[str, Any]]
    tail: list[Message]
    window: int  # the model's context window, input and output (the chat's gauge shows it)
    budget: int
    fixed: int
    factor: float
    summarized_up_to: int
    history_tokens: int
    # The model it was drafted for (app/chat/model_choice.py).
    model: ChosenModel | None = None

    def finish(self, notices: list[Message], shrink: float = 1.0) -> PreparedRequest:
        """Fit what is left (app/chat/fitting.py): older turns go, then the turn's oldest
        tool steps, then its largest results are shortened; TurnTooLarge when even that
        does not fit."""
        budget = int(self.budget * shrink / self.factor)
        messages = fit_messages(self.messages, budget, "thinking" in self.request)
        request = {**self.request, "messages": messages}
        estimate = math.ceil(estimate_messages(messages) * self.factor) + self.fixed
        return PreparedRequest(request=request, estimated_input=estimate, notices=notices)
