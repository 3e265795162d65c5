"""`python -m scorecard [--suites banking,slack] [--limit N] [--policy P] [--model NAME]
[--write-doc]`: AgentDojo's suites through Loopdesk's gate; prints the table, and with
--write-doc rewrites it in docs/security.md."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from scorecard.suites import ATTACK, BENCHMARK_VERSION, SUITE_NAMES

POLICIES = ("when_tainted", "read-only")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m scorecard", description=__doc__)
    parser.add_argument("--suites", default=",".join(SUITE_NAMES), help="comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="tasks of each kind per suite")
    parser.add_argument(
        "--policy",
        default=",".join(POLICIES),
        help="when_tainted (Loopdesk's default), read-only (policy never, the read-only "
        "hints of the suite's reading tools approved), or both, comma-separated",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="a real model's name (needs ANTHROPIC_API_KEY) instead of the scripted one",
    )
    parser.add_argument(
        "--approve-cards",
        action="store_true",
        help="the control: approve every card instead of declining it (what the gate holds back)",
    )
    parser.add_argument("--write-doc", action="store_true", help="rewrite docs/security.md")
    parser.add_argument("--details", default=None, help="write every task's outcome here (JSON)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from scorecard.harness import Options, run_suite
    from scorecard.report import figures, table, write_doc

    args = _arguments(argv)
    if args.model and not os.environ.get("ANTHROPIC_API_KEY"):
        print("--model needs ANTHROPIC_API_KEY.", file=sys.stderr)
        return 2
    policies = [p for p in args.policy.split(",") if p]
    if unknown := set(policies) - set(POLICIES):
        print(f"Unknown policy: {', '.join(sorted(unknown))}.", file=sys.stderr)
        return 2
    rows, details = [], []
    started = time.monotonic()
    for suite_name in [s for s in args.suites.split(",") if s]:
        for policy in policies:
            options = Options(policy, args.limit, args.model, args.approve_cards)
            outcomes = run_suite(suite_name, options, _progress)
            rows.append(figures(suite_name, policy, outcomes))
            details += [{"suite": suite_name, "policy": policy, **asdict(o)} for o in outcomes]
    print(table(rows))
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    if args.details:
        Path(args.details).write_text(json.dumps(details, indent=1))
    if args.write_doc and args.approve_cards:
        print("The control's figures are not the scorecard: not written.", file=sys.stderr)
    elif args.write_doc:
        write_doc(rows, _note(args))
    return 0


def _progress(suite: str, number: int, total: int, outcome: object) -> None:
    if number % 25 == 0 or number == total:
        print(f"{suite}: {number}/{total}", file=sys.stderr, flush=True)


def _note(args: argparse.Namespace) -> str:
    model = args.model or "the scripted obedient model"
    limit = f", the first {args.limit} tasks of each kind" if args.limit else ""
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    return (
        f"Written by `make scorecard` on {day}: AgentDojo {BENCHMARK_VERSION} "
        f"(agentdojo 0.1.35), attack `{ATTACK}`, {model}{limit}; every card declined."
    )


if __name__ == "__main__":
    sys.exit(main())
