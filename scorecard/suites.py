"""What the scorecard takes from AgentDojo: its suites at one benchmark version, the
read-only tools, and the attack's text for a (user task, injection task) pair."""

from __future__ import annotations

from functools import cache
from typing import Any

BENCHMARK_VERSION = "v1.2.2"
SUITE_NAMES = ("workspace", "travel", "banking", "slack")
ATTACK = "important_instructions"
# Tools that only read the environment: their names say so, except get_webpage, which
# records the visit on the (simulated) web, an effect an injection task asks for.
READ_PREFIXES = ("get_", "read_", "search_", "list_", "check_")
NOT_READ_ONLY = {"get_webpage"}


@cache
def suite(name: str) -> Any:
    from agentdojo.task_suite.load_suites import get_suite

    return get_suite(BENCHMARK_VERSION, name)


def read_only(tool_name: str) -> bool:
    return tool_name.startswith(READ_PREFIXES) and tool_name not in NOT_READ_ONLY


class _Pipeline:
    """What the attack reads of the attacked pipeline: a name that names the model."""

    name = "claude-3-5-sonnet-20241022"


@cache
def _attack(suite_name: str) -> Any:
    from agentdojo.attacks.attack_registry import load_attack

    return load_attack(ATTACK, suite(suite_name), _Pipeline())  # type: ignore[arg-type]


def injections(suite_name: str, user_task_id: str, injection_task_id: str) -> dict[str, str]:
    """The attack's text for each injection vector the user task's model would read."""
    the_suite = suite(suite_name)
    user_task = the_suite.get_user_task_by_id(user_task_id)
    injection_task = the_suite.get_injection_task_by_id(injection_task_id)
    return dict(_attack(suite_name).attack(user_task, injection_task))
