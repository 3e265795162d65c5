"""An eval: load the datasets, run every case (each `repeat` times) through the real loop on
services of its own, judge each transcript, and say how many runs passed.

Every eval writes into a database of its own, a new SQLite file in its directory (beside
the transcripts): a case makes people, chats and outputs, and none of that belongs in
anyone's real data. The model is the configured one (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY,
HOST_MODEL, FAST_MODEL): that is what an eval measures."""

from __future__ import annotations

import asyncio
import contextvars
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_evals import Dataset
from pydantic_evals.reporting import EvaluationReport

from app.agents.guidelines import ensure_seeded
from app.config import Settings
from app.evals.cases import EvalInputs
from app.evals.drive import run_case
from app.evals.evaluators import EVALUATORS
from app.evals.judge import Judge, judging_with, transcript_text
from app.evals.transcript import Transcript
from app.models import Base
from app.services import Services, build_services

EvalDataset = Dataset[EvalInputs, Any, Any]


def load_dataset(path: Path) -> EvalDataset:
    """A dataset file with our evaluators (ValueError naming the file when it is invalid)."""
    return EvalDataset.from_file(path, custom_evaluator_types=EVALUATORS)


@dataclass
class RunOutcome:
    """One run of one case: whether every check passed, and what each said."""

    dataset: str
    case: str
    run: int
    passed: bool
    checks: dict[str, tuple[bool, str]] = field(default_factory=dict)
    error: str = ""
    transcript_file: str = ""
    transcript_text: str = ""  # what the report shows of it


@dataclass
class EvalResult:
    outcomes: list[RunOutcome]
    tables: list[str]  # pydantic-evals' table of each dataset, rendered
    directory: Path

    @property
    def pass_rate(self) -> float:
        return sum(o.passed for o in self.outcomes) / len(self.outcomes) if self.outcomes else 0.0

    def case_rates(self) -> list[tuple[str, str, int, int]]:
        """(dataset, case, runs passed, runs) per case, in the order they ran."""
        rates: dict[tuple[str, str], list[int]] = {}
        for outcome in self.outcomes:
            counted = rates.setdefault((outcome.dataset, outcome.case), [0, 0])
            counted[0] += outcome.passed
            counted[1] += 1
        return [(d, c, passed, runs) for (d, c), (passed, runs) in rates.items()]


def eval_services(settings: Settings, directory: Path) -> Services:
    """The app's services on a new SQLite file in `directory`, with its schema and the
    shared guidelines the agents read; runs execute in this process (no queue, no Redis)."""
    directory.mkdir(parents=True, exist_ok=True)
    database = directory / "eval.db"
    database.unlink(missing_ok=True)
    own = settings.model_copy(
        update={
            "database_url": f"sqlite:///{database}",
            "redis_url": None,
            "run_executor": "thread",
            # Naming a chat is one more model request that no case measures.
            "chat_titles": False,
        }
    )
    services = build_services(own)
    Base.metadata.create_all(services.database.engine)
    with services.database.session() as session:
        ensure_seeded(session)
        session.commit()
    return services


def run_eval(
    services: Services,
    paths: list[Path],
    directory: Path,
    *,
    repeat: int = 1,
    concurrency: int = 1,
    judge_model: str | None = None,
    progress: bool = False,
) -> EvalResult:
    judge = Judge(services.model, judge_model or services.settings.host_model_name)
    outcomes: list[RunOutcome] = []
    tables: list[str] = []
    with judging_with(judge):
        for path in paths:
            dataset = load_dataset(path)
            name = dataset.name or path.stem

            def task(inputs: EvalInputs, dataset_name: str = name) -> Transcript:
                return run_case(services, dataset_name, inputs)

            report = _evaluated(
                dataset,
                task,
                name=name,
                max_concurrency=concurrency,
                progress=progress,
                repeat=repeat,
            )
            tables.append(report.render(width=120, include_reasons=True))
            outcomes.extend(_outcomes(name, report, directory / "transcripts"))
    return EvalResult(outcomes, tables, directory)


def _evaluated(dataset: EvalDataset, task: Any, **options: Any) -> EvaluationReport:
    """The dataset evaluated in a thread of its own: pydantic-evals runs an asyncio loop,
    which cannot start in a thread already running one (a notebook's, or a Playwright
    session's in the same test process)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="eval") as pool:
        context = contextvars.copy_context()
        return pool.submit(context.run, _on_own_loop, dataset, task, options).result()


def _on_own_loop(dataset: EvalDataset, task: Any, options: dict[str, Any]) -> EvaluationReport:
    """evaluate_sync on a loop this thread makes and closes (pydantic-evals would leave the
    one it makes open)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return dataset.evaluate_sync(task, **options)
    finally:
        asyncio.set_event_loop(None)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


_RUN_INDEX = re.compile(r" \[(\d+)/\d+\]$")


def _case_and_run(name: str, source: str | None) -> tuple[str, int]:
    found = _RUN_INDEX.search(name)
    return (source or name), int(found.group(1)) if found else 1


def _file_name(*parts: str) -> str:
    return "__".join(re.sub(r"[^A-Za-z0-9_-]+", "-", part).strip("-") for part in parts)


def _outcomes(
    dataset: str, report: EvaluationReport[Any, Any, Any], into: Path
) -> list[RunOutcome]:
    into.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for case in report.cases:
        name, run = _case_and_run(case.name, case.source_case_name)
        checks = {key: (bool(r.value), r.reason or "") for key, r in case.assertions.items()}
        transcript: Transcript = case.output
        failures = [f"{f.name}: {f.error_message}" for f in case.evaluator_failures]
        transcript.case = name
        path = into / f"{_file_name(dataset, name, str(run))}.json"
        path.write_text(transcript.to_json(), encoding="utf-8")
        passed = all(ok for ok, _ in checks.values()) and not failures
        said = "; ".join([*transcript.problems, *failures])
        outcome = RunOutcome(dataset, name, run, passed, checks, said, str(path))
        outcome.transcript_text = transcript_text(transcript)
        outcomes.append(outcome)
    for failure in report.failures:
        # The case raised before it had a transcript: its file says what was raised.
        name, run = _case_and_run(failure.name, failure.source_case_name)
        path = into / f"{_file_name(dataset, name, str(run))}.json"
        raised = {"case": name, "error": failure.error_message, "stack": failure.error_stacktrace}
        path.write_text(json.dumps(raised, indent=2), encoding="utf-8")
        outcomes.append(RunOutcome(dataset, name, run, False, {}, failure.error_message, str(path)))
    return outcomes
