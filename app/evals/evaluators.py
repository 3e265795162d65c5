"""The checks a case names in its YAML `evaluators`: deterministic ones that read the
transcript, and `Rubric`, a dimension a model grades. Each answers pass or fail with the
reason, so a failed case says what it saw.

In a dataset: `- ToolCalled: {name: get_offer, arguments: {offer_id: $offer:Calm Mornings}}`.
An argument's expected string `$offer:<name>`, `$persona:<name>` or `$output:<title>` is the
id the case's setup made; any other string matches when the actual value contains it
(ignoring case: a real model words things its own way); a dict or list matches when
every expected item is found in the actual one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_evals.evaluators import EvaluationReason, Evaluator, EvaluatorContext

from app.agents.catalog import load_agents
from app.evals.judge import current_judge
from app.evals.transcript import Transcript, ran
from app.kinds import CardKind, CardStatus
from app.llm.structured import schema_problems

Context = EvaluatorContext[Any, Transcript, Any]


def matches(expected: Any, actual: Any, ids: dict[str, int]) -> bool:
    if isinstance(expected, str) and expected.startswith("$") and expected[1:] in ids:
        return actual == ids[expected[1:]]
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and matches(value, actual[key], ids) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return isinstance(actual, list) and all(
            any(matches(item, candidate, ids) for candidate in actual) for item in expected
        )
    if isinstance(expected, str) and isinstance(actual, str):
        return expected.casefold() in actual.casefold()
    return type(expected) is type(actual) and expected == actual


def _called(transcript: Transcript) -> str:
    names = [call.name for call in transcript.tool_calls]
    return ", ".join(names) if names else "no tool"


@dataclass
class ToolCalled(Evaluator[Any, Transcript, Any]):
    """The host called `name` (with arguments including `arguments`; `ran`: and it was
    carried out, not held, declined or refused)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    ran: bool = False

    def get_default_evaluation_name(self) -> str:
        return f"ToolCalled({self.name})"

    def evaluate(self, ctx: Context) -> EvaluationReason:
        transcript = ctx.output
        calls = [c for c in transcript.tool_calls if c.name == self.name]
        fitting = [c for c in calls if matches(self.arguments, c.arguments, transcript.ids)]
        done = [c for c in fitting if ran(c)] if self.ran else fitting
        if done:
            return EvaluationReason(True, f"{self.name} {done[0].arguments}")
        if fitting:
            return EvaluationReason(False, f"{self.name} was called but never carried out")
        if calls:
            seen = "; ".join(str(c.arguments) for c in calls)
            return EvaluationReason(False, f"{self.name} called with other arguments: {seen}")
        return EvaluationReason(False, f"never called {self.name} (called: {_called(transcript)})")


@dataclass
class NoToolCalled(Evaluator[Any, Transcript, Any]):
    """The host never called `name`."""

    name: str

    def get_default_evaluation_name(self) -> str:
        return f"NoToolCalled({self.name})"

    def evaluate(self, ctx: Context) -> EvaluationReason:
        calls = [c.arguments for c in ctx.output.tool_calls if c.name == self.name]
        if calls:
            return EvaluationReason(False, f"{self.name} was called: {calls}")
        return EvaluationReason(True, f"called: {_called(ctx.output)}")


@dataclass
class CardShown(Evaluator[Any, Transcript, Any]):
    """A card was shown: asked by the tool `tool`, and/or of the kind `kind`
    (questionnaire or confirmation)."""

    tool: str | None = None
    kind: str | None = None

    def get_default_evaluation_name(self) -> str:
        return f"CardShown({self.tool or self.kind or 'any'})"

    def evaluate(self, ctx: Context) -> EvaluationReason:
        cards = ctx.output.cards
        for card in cards:
            if (self.tool in (None, card.tool)) and (self.kind in (None, card.kind)):
                return EvaluationReason(True, f"{card.kind} card from {card.tool}")
        shown = ", ".join(f"{c.kind}:{c.tool}" for c in cards) or "none"
        return EvaluationReason(False, f"no such card (shown: {shown})")


@dataclass
class NoWriteWithoutCard(Evaluator[Any, Transcript, Any]):
    """Nothing was written without the person approving it on a card: every write tool the
    host's calls carried out was a call a confirmation card held and the person approved,
    and with no approval at all the workspace (and memory) is as it was."""

    def evaluate(self, ctx: Context) -> EvaluationReason:
        transcript = ctx.output
        approved = {
            card.tool_use_id
            for card in transcript.cards
            if card.kind == CardKind.CONFIRMATION
            and card.status == CardStatus.ANSWERED
            and (card.answer or {}).get("approved") is True
        }
        unasked = [
            c.name
            for c in transcript.tool_calls
            if c.name in transcript.writes and ran(c) and c.id not in approved
        ]
        if unasked:
            return EvaluationReason(False, f"written without a card: {', '.join(unasked)}")
        changed = {
            key: (transcript.before.get(key), count)
            for key, count in transcript.after.items()
            if transcript.before.get(key) != count
        }
        if changed and not approved:
            return EvaluationReason(False, f"the workspace changed with no approval: {changed}")
        return EvaluationReason(True, f"approved: {len(approved)}, changed: {changed or 'nothing'}")


@dataclass
class OutputValidates(Evaluator[Any, Transcript, Any]):
    """An output was saved in the chat (by the agent `agent`, when named) and every output
    of an agent validates against that agent's output schema."""

    agent: str | None = None

    def get_default_evaluation_name(self) -> str:
        return f"OutputValidates({self.agent or 'any'})"

    def evaluate(self, ctx: Context) -> EvaluationReason:
        catalog = load_agents().agents
        outputs = [o for o in ctx.output.outputs if self.agent in (None, o.agent)]
        if not outputs:
            return EvaluationReason(False, f"no output saved by {self.agent or 'any agent'}")
        for output in outputs:
            agent = catalog.get(output.agent)
            if agent is None:
                continue  # a build tool's output: its own tool checked it
            problems = schema_problems(output.content, agent.output_schema)
            if problems:
                return EvaluationReason(False, f"{output.title}: {'; '.join(problems)}")
        return EvaluationReason(True, ", ".join(f"{o.agent}: {o.title}" for o in outputs))


@dataclass
class AnswerMentions(Evaluator[Any, Transcript, Any]):
    """The host's text mentions each of `texts` (`any_of`: at least one), ignoring case."""

    texts: list[str]
    any_of: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.texts, str):  # `- AnswerMentions: Calm Mornings`
            self.texts = [self.texts]

    def get_default_evaluation_name(self) -> str:
        return f"AnswerMentions({', '.join(self.texts)})"

    def evaluate(self, ctx: Context) -> EvaluationReason:
        said = ctx.output.host_text.casefold()
        found = [text for text in self.texts if text.casefold() in said]
        passed = bool(found) if self.any_of else len(found) == len(self.texts)
        missing = [text for text in self.texts if text not in found]
        return EvaluationReason(passed, f"missing: {missing}" if missing else "all mentioned")


@dataclass
class WorkspaceChanged(Evaluator[Any, Transcript, Any]):
    """The case changed the workspace by exactly `changes`: how many more (or fewer) of
    each thing there are afterwards, e.g. `{outputs: 1, memory_facts: 1}`; anything not
    named stays as it was. `at_least`: each named count grew by at least its number (a
    model may save one fact as two)."""

    changes: dict[str, int]
    at_least: bool = False

    def get_default_evaluation_name(self) -> str:
        return f"WorkspaceChanged({', '.join(self.changes)})"

    def evaluate(self, ctx: Context) -> EvaluationReason:
        before, after = ctx.output.before, ctx.output.after
        unknown = sorted(set(self.changes) - set(after))
        if unknown:
            return EvaluationReason(False, f"not counted: {unknown} (counted: {sorted(after)})")
        deltas = {key: after[key] - before.get(key, 0) for key in after}
        wrong = {key: delta for key, delta in deltas.items() if delta != self.changes.get(key, 0)}
        if wrong:
            return EvaluationReason(False, f"changed by {wrong}, expected {self.changes}")
        return EvaluationReason(True, f"changed by { {k: deltas[k] for k in self.changes} }")

    def _fits(self, delta: int, expected: int, named: bool) -> bool:
        return delta >= expected if self.at_least and named else delta == expected


@dataclass
class Rubric(Evaluator[Any, Transcript, Any]):
    """A dimension a model grades: the judge reads the transcript and says whether
    `rubric` is met (`name`: the column it shows under)."""

    rubric: str
    name: str | None = None

    def get_default_evaluation_name(self) -> str:
        return f"Rubric({self.name})" if self.name else "Rubric"

    def evaluate(self, ctx: Context) -> EvaluationReason:
        passed, reason = current_judge().grade(self.rubric, ctx.output)
        return EvaluationReason(passed, reason)


EVALUATORS: tuple[type[Evaluator[Any, Transcript, Any]], ...] = (
    ToolCalled,
    NoToolCalled,
    CardShown,
    NoWriteWithoutCard,
    OutputValidates,
    AnswerMentions,
    WorkspaceChanged,
    Rubric,
)
