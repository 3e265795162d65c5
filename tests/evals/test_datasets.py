"""The shipped datasets (evals/*.yaml) load, and name only tools, agents, card kinds and
counts that exist: a renamed tool fails here, not in someone's eval against a real key.
Together they cover every tool category, every agent and the safety gate."""

from __future__ import annotations

from typing import Any

import pytest

from app.agents.catalog import load_agents
from app.cli.evals import shipped_datasets
from app.evals.evaluators import (
    CardShown,
    NoToolCalled,
    NoWriteWithoutCard,
    OutputValidates,
    Rubric,
    ToolCalled,
    WorkspaceChanged,
)
from app.evals.runner import load_dataset
from app.evals.workspace import COUNTED
from app.kinds import CardKind
from app.llm.structured import schema_problems
from app.tools.build import build_registry

AGENTS = load_agents()
TOOLS = {tool.name: tool for tool in build_registry(AGENTS).all()}
DATASETS = {path.stem: load_dataset(path) for path in shipped_datasets()}


def _evaluators(dataset) -> list[tuple[Any, Any]]:
    return [(case, e) for case in dataset.cases for e in [*case.evaluators, *dataset.evaluators]]


def _setup_names(case) -> set[str]:
    setup = case.inputs.setup
    names = {f"offer:{offer.name}" for offer in setup.offers}
    names |= {f"persona:{p.name}" for offer in setup.offers for p in offer.personas}
    return names | {f"output:{output.title}" for output in setup.outputs}


def _placeholders(value: Any) -> list[str]:
    if isinstance(value, str) and value.startswith(("$offer:", "$persona:", "$output:")):
        return [value[1:]]
    if isinstance(value, dict):
        return [found for item in value.values() for found in _placeholders(item)]
    if isinstance(value, list):
        return [found for item in value for found in _placeholders(item)]
    return []


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_a_shipped_dataset_names_only_what_exists(name):
    dataset = DATASETS[name]
    assert dataset.cases, f"{name} has no case"
    for case, evaluator in _evaluators(dataset):
        where = f"{name} / {case.name}"
        if isinstance(evaluator, ToolCalled | NoToolCalled):
            assert evaluator.name in TOOLS, f"{where}: no tool {evaluator.name}"
        if isinstance(evaluator, ToolCalled):
            for key in evaluator.arguments:
                schema = TOOLS[evaluator.name].input_schema["properties"]
                assert key in schema, f"{where}: {evaluator.name} takes no {key}"
            for placeholder in _placeholders(evaluator.arguments):
                assert placeholder in _setup_names(case), f"{where}: no {placeholder} in setup"
        if isinstance(evaluator, CardShown):
            assert (
                evaluator.tool is None
                or TOOLS[evaluator.tool].category == "ui"
                or (evaluator.kind == CardKind.CONFIRMATION)
            ), f"{where}: {evaluator.tool} shows no card"
            assert evaluator.kind in (None, *CardKind), f"{where}: no card kind {evaluator.kind}"
        if isinstance(evaluator, OutputValidates):
            assert evaluator.agent in (None, *AGENTS.agents), f"{where}: no agent {evaluator.agent}"
        if isinstance(evaluator, WorkspaceChanged):
            assert set(evaluator.changes) <= {*COUNTED, "memory_facts"}, where
    for case in dataset.cases:
        for reply in case.inputs.replies:
            for placeholder in _placeholders(reply.result or {}):
                assert placeholder in _setup_names(case), f"{case.name}: no {placeholder}"
        for output in case.inputs.setup.outputs:
            agent = AGENTS.agents.get(output.agent)
            assert agent is not None, f"{case.name}: no agent {output.agent}"
            assert schema_problems(output.content, agent.output_schema) == [], output.title


def test_the_shipped_datasets_cover_each_tool_category_every_agent_and_the_gate():
    evaluators = [e for dataset in DATASETS.values() for _, e in _evaluators(dataset)]
    called = {e.name for e in evaluators if isinstance(e, ToolCalled)}
    carded = {e.tool for e in evaluators if isinstance(e, CardShown) and e.tool}
    assert {TOOLS[name].category for name in called | carded} >= {"read", "ui", "action", "agent"}
    assert {agent.tool_name for agent in AGENTS} <= called
    assert {"remember", "read_attachment"} <= called  # memory, and outside content
    assert any(isinstance(e, NoWriteWithoutCard) for e in evaluators)
    assert any(isinstance(e, CardShown) and e.kind == CardKind.CONFIRMATION for e in evaluators)
    rubrics = {e.name for e in evaluators if isinstance(e, Rubric)}
    assert "adapts the referenced output instead of copying it" in rubrics
    assert "asks before assuming the offer" in rubrics
    assert set(DATASETS) >= {
        "reads",
        "cards",
        "agents",
        "actions",
        "referencing",
        "memory",
        "safety",
    }


def test_every_shipped_case_sets_up_its_workspace(db):
    from app.evals.workspace import start_case, workspace_counts

    for name, dataset in DATASETS.items():
        for case in dataset.cases:
            user_id, _chat_id, ids = start_case(db, case.inputs.setup)
            assert set(ids) == _setup_names(case), f"{name} / {case.name}"
            counts = workspace_counts(db, user_id)
            assert counts["memory_facts"] == len(case.inputs.setup.memory)
    db.rollback()
