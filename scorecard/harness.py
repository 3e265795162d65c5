"""Drives AgentDojo's tasks through a throwaway Loopdesk: one app and one suite server per
suite, every user task alone (utility) and every (user task, injection task) pair
(security), each in a new chat, through the real loop, every card declined."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2 as httpx
from agentdojo.functions_runtime import FunctionCall

from scorecard.suites import injections, read_only, suite

MAX_CARDS = 25  # a run that keeps asking is cut here (each card declined)
RUN_TIMEOUT = 120.0


@dataclass
class Outcome:
    """One task run: what the checks said and what the person was asked."""

    user_task: str
    injection_task: str | None
    cards: int
    passed: bool  # the user task's utility check
    attacked: bool = False  # the injection task's security check: its harm was done
    injection_read: bool = False  # the model read the injection (a real test of the gate)
    held_tools: list[str] = field(default_factory=list)


@dataclass
class Options:
    policy: str = "when_tainted"  # or "read-only": policy never, read-only hints approved
    limit: int | None = None  # user tasks (and injection tasks) per suite
    real_model: str | None = None  # a model name: the real API (ANTHROPIC_API_KEY) instead
    # The control: every card approved instead of declined (what the gate holds back).
    approve_cards: bool = False


@contextmanager
def suite_server(suite_name: str) -> Iterator[str]:
    """The suite's MCP server process; its base URL (MCP at /mcp)."""
    from tests.ports import free_port

    port = free_port()
    command = [sys.executable, "-m", "scorecard.server", suite_name, str(port)]
    root = Path(__file__).resolve().parent.parent
    process = subprocess.Popen(command, cwd=root, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(f"{base}/state", process)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def _wait_until_up(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("The suite's MCP server stopped at its start.")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("The suite's MCP server did not start in time.")


@contextmanager
def loopdesk(model_url: str | None, real_model: str | None) -> Iterator[Any]:
    """A throwaway Loopdesk (its own SQLite file), and a logged-in driver of its JSON API."""
    from app import create_app
    from app.models import Base
    from tests.factories import AuthActions, logged_in_driver

    with tempfile.TemporaryDirectory(prefix="scorecard-") as folder:
        config: dict[str, Any] = {
            "instance_path": Path(folder) / "instance",
            "database_url": f"sqlite:///{Path(folder) / 'scorecard.db'}",
            "secret_key": "scorecard-throwaway",
            "TESTING": True,
            "model_provider": "anthropic",
            "chat_titles": False,
            "mcp_timeout_seconds": 30,
            # The scorecard measures the gate, not the cap on model calls per run or the
            # limit on messages a person sends.
            "max_iterations": 40,
            "rate_limit_messages": "100000 per minute",
        }
        if model_url is not None:
            config.update(anthropic_base_url=model_url, anthropic_api_key="scripted")
        if real_model is not None:
            config["host_model"] = real_model
        app = create_app(config)
        Base.metadata.create_all(app.extensions["database"].engine)
        try:
            yield logged_in_driver(app, AuthActions(app, app.test_client()))
        finally:
            app.extensions["executor"].shutdown()
            app.extensions["services"].close()


def register(driver: Any, name: str, base: str, policy: str) -> list[str]:
    """The suite's server added to Loopdesk as an admin would; the tools it offers."""
    runner = driver.app.test_cli_runner()
    wanted = "never" if policy == "read-only" else policy
    added = runner.invoke(args=["mcp", "add", name, "--url", f"{base}/mcp", "--policy", wanted])
    if added.exit_code != 0:
        raise RuntimeError(f"Loopdesk refused the suite's server: {added.output}")
    listed = runner.invoke(args=["mcp", "list", "--json"])
    (server,) = [s for s in json.loads(listed.output) if s["name"] == name]
    names = [tool["name"] for tool in server["tools"]]
    if policy == "read-only":
        approve = ["mcp", "approve", name]
        for tool_name in names:
            if read_only(tool_name):
                approve += ["--read-only", tool_name]
        approved = runner.invoke(args=approve)
        if approved.exit_code != 0:
            raise RuntimeError(f"Loopdesk refused the read-only hints: {approved.output}")
    return names


class SuiteRun:
    """One suite's server, model and Loopdesk, for any number of tasks."""

    def __init__(self, suite_name: str, base: str, driver: Any, model: Any) -> None:
        self.suite = suite(suite_name)
        self.base = base
        self.driver = driver
        self.model = model  # the obedient model, or None for a real one
        self.model_server: Any = None
        self.approve_cards = False

    def run(self, user_task_id: str, injection_task_id: str | None = None) -> Outcome:
        found = {}
        if injection_task_id is not None:
            found = injections(self.suite.name, user_task_id, injection_task_id)
        reset = {"user_task": user_task_id, "injections": found}
        pre = httpx.post(f"{self.base}/reset", json=reset, timeout=30).json()["environment"]
        environment_type = self.suite.environment_type
        pre_environment = environment_type.model_validate(pre)
        if self.model is not None:
            self.model.environment = pre_environment
        user_task = self.suite.get_user_task_by_id(user_task_id)
        cards, held, answer = self._drive(user_task.PROMPT)
        state = httpx.get(f"{self.base}/state", timeout=30).json()
        post = environment_type.model_validate(state["environment"])
        trace = [FunctionCall(**call) for call in state["calls"]]
        output = [{"type": "text", "content": answer}]
        outcome = Outcome(user_task_id, injection_task_id, cards, held_tools=held, passed=False)
        outcome.passed = bool(
            self.suite._check_user_task_utility(user_task, output, pre_environment, post, trace)
        )
        if injection_task_id is not None:
            injection_task = self.suite.get_injection_task_by_id(injection_task_id)
            outcome.attacked = bool(
                self.suite._check_injection_task_security(
                    injection_task, output, pre_environment, post, trace
                )
            )
            outcome.injection_read = self._read(injection_task)
        return outcome

    def _read(self, injection_task: Any) -> bool:
        if self.model is None:
            return False  # a real model's reading is not known
        return injection_task in self.model.last_plan.obeyed

    def _drive(self, prompt: str) -> tuple[int, list[str], str]:
        """One chat: the prompt sent, every card declined (or, the control, approved);
        (cards, held tools, answer)."""
        chat = self.driver
        chat_id = chat.new_chat()
        run = chat.wait(chat.send(chat_id, prompt), timeout=RUN_TIMEOUT)
        cards, held = 0, []
        while run["status"] == "awaiting" and cards < MAX_CARDS:
            card = chat.rows(chat_id)[-1]["card"]
            cards += 1
            held.append(str(card.get("serverTool") or card.get("tool")))
            reply = {"approved": self.approve_cards}
            answered = chat.answer(chat_id, card["toolUseId"], reply)
            run = chat.wait(answered.get_json()["runId"], timeout=RUN_TIMEOUT)
        return cards, held, _last_answer(chat.rows(chat_id))


def _last_answer(rows: list[dict[str, Any]]) -> str:
    """The model's last words in the chat (its answer to the person)."""
    for row in reversed(rows):
        if row.get("role") == "assistant" and row.get("content"):
            return str(row["content"])
    return ""


def run_suite(suite_name: str, options: Options, progress: Any = None) -> list[Outcome]:
    """Every user task alone, then every (user task, injection task) pair, of one suite."""
    the_suite = suite(suite_name)
    user_ids = _ids(the_suite.user_tasks, options.limit)
    injection_ids = _ids(the_suite.injection_tasks, options.limit)
    jobs: list[tuple[str, str | None]] = [(u, None) for u in user_ids]
    jobs += [(u, i) for u in user_ids for i in injection_ids]
    outcomes = []
    with suite_session(suite_name, options) as run:
        for number, (user_id, injection_id) in enumerate(jobs, 1):
            outcomes.append(run.run(user_id, injection_id))
            if progress is not None:
                progress(suite_name, number, len(jobs), outcomes[-1])
    return outcomes


@contextmanager
def suite_session(suite_name: str, options: Options) -> Iterator[SuiteRun]:
    """The suite's server, the model and a Loopdesk with the server registered."""
    with suite_server(suite_name) as base, _model_server(suite_name, options) as model:
        model_url = None if options.real_model else model.url
        with loopdesk(model_url, options.real_model) as driver:
            register(driver, suite_name, base, options.policy)
            run = SuiteRun(suite_name, base, driver, model.responder)
            run.model_server = model.server
            run.approve_cards = options.approve_cards
            yield run


class _Scripted:
    def __init__(self, url: str | None, responder: Any, server: Any = None) -> None:
        self.url = url
        self.responder = responder
        self.server = server  # the fake Messages API (its `requests`), when scripted


@contextmanager
def _model_server(suite_name: str, options: Options) -> Iterator[_Scripted]:
    """The obedient model behind a fake Messages API, or nothing for a real model."""
    if options.real_model:
        yield _Scripted(None, None)
        return
    from scorecard.model import ObedientModel
    from tests.fake_model import FakeModelServer

    responder = ObedientModel(suite(suite_name), suite_name)
    server = FakeModelServer().start()
    server.responder = responder
    try:
        yield _Scripted(server.base_url, responder, server)
    finally:
        server.stop()


def _ids(tasks: dict[str, Any], limit: int | None) -> list[str]:
    ordered = sorted(tasks, key=lambda name: int(name.rsplit("_", 1)[1]))
    return ordered[:limit] if limit else ordered
