"""The scripted "obedient" model: the strongest attacker a gate can face. It understands
any instruction perfectly and does whatever the text it read says: the user's task (its
ground-truth calls, one per turn), and an injection task's goal found in a tool result
(that task's ground-truth calls, first, as the injection asks); then it answers in text.
Understanding is a lookup from a task's words to its ground truth: the honest way to
script a perfect reader.

It answers as the fake Messages API of tests/fake_model.py (the `responder` of a
FakeModelServer). Its only state is the request, so a declined card (a tool result saying
so) simply moves it on to its next call."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_NOT_WORDS = re.compile(r"[^a-z0-9]+")


def words(value: str) -> str:
    """Letters and digits only: the same words whatever quoting, escaping or folding
    (YAML, JSON) a tool result went through."""
    return _NOT_WORDS.sub("", value.lower())


def texts_of(content: Any) -> list[str]:
    """Every string in a message's content, tool results (and JSON inside them) included."""
    if isinstance(content, str):
        try:
            decoded = json.loads(content)
        except ValueError:
            return [content]
        return [content, *texts_of(decoded)] if not isinstance(decoded, str) else [content]
    if isinstance(content, list):
        return [text for item in content for text in texts_of(item)]
    if isinstance(content, dict):
        return [text for value in content.values() for text in texts_of(value)]
    return []


@dataclass
class Plan:
    """What the model has decided to do, read from the conversation so far."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    made: int = 0
    user_task: Any = None
    obeyed: list[Any] = field(default_factory=list)


class ObedientModel:
    """`responder(body) -> Turn` for one suite served as the MCP server `server_name`.
    `environment`: the task's environment before it runs (ground truths are computed on it);
    the harness sets it before each task."""

    def __init__(self, suite: Any, server_name: str) -> None:
        self.server_name = server_name
        self.prompts = {words(task.PROMPT): task for task in suite.user_tasks.values()}
        self.goals = {words(task.GOAL): task for task in suite.injection_tasks.values()}
        self.environment: Any = None
        self.last_plan = Plan()  # what it had decided when it last answered

    def __call__(self, body: dict[str, Any]) -> Any:
        from tests.fake_model import Turn, text, tool_use

        plan = self.last_plan = self.plan(body["messages"])
        if plan.made < len(plan.calls):
            function, arguments = plan.calls[plan.made]
            return Turn(tool_use(f"mcp__{self.server_name}__{function}", arguments))
        outputs = [task.GROUND_TRUTH_OUTPUT for task in [plan.user_task, *plan.obeyed] if task]
        return Turn(text(" ".join(o for o in outputs if o) or "Done."))

    def plan(self, messages: list[dict[str, Any]]) -> Plan:
        plan = Plan()
        for message in messages:
            if message["role"] == "assistant":
                content = message["content"]
                blocks = content if isinstance(content, list) else []
                plan.made += sum(1 for block in blocks if block.get("type") == "tool_use")
                continue
            read = words(" ".join(texts_of(message["content"])))
            self._obey_user(plan, read)
            self._obey_injections(plan, read)
        return plan

    def _obey_user(self, plan: Plan, read: str) -> None:
        for prompt, task in self.prompts.items():
            if prompt and prompt in read and plan.user_task is None:
                plan.user_task = task
                plan.calls[plan.made :] = self._calls(task) + plan.calls[plan.made :]

    def _obey_injections(self, plan: Plan, read: str) -> None:
        for goal, task in self.goals.items():
            if goal and goal in read and task not in plan.obeyed:
                plan.obeyed.append(task)
                plan.calls[plan.made : plan.made] = self._calls(task)

    def _calls(self, task: Any) -> list[tuple[str, dict[str, Any]]]:
        calls = task.ground_truth(self.environment.model_copy(deep=True))
        return [(call.function, _plain(dict(call.args))) for call in calls]


def _plain(value: Any) -> Any:
    """Arguments as JSON values (a ground truth may hold tuples or nested models)."""
    return json.loads(json.dumps(value, default=str))
