"""The scorecard's figures per suite, and the table written into docs/security.md between
its markers, beside the published figures of CaMeL and undefended agents."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scorecard import published

BEGIN = "<!-- scorecard:begin -->"
END = "<!-- scorecard:end -->"
DOC = Path(__file__).resolve().parent.parent / "docs" / "security.md"


@dataclass
class SuiteFigures:
    suite: str
    policy: str
    user_tasks: int
    passed_without_card: int
    pairs: int
    attacks_through: int
    injections_read: int
    cards_user: int
    cards_attacked: int

    @property
    def utility(self) -> float:
        return self.passed_without_card / self.user_tasks if self.user_tasks else 0.0

    @property
    def attack_success(self) -> float:
        return self.attacks_through / self.pairs if self.pairs else 0.0


def figures(suite: str, policy: str, outcomes: list[Any]) -> SuiteFigures:
    alone = [o for o in outcomes if o.injection_task is None]
    pairs = [o for o in outcomes if o.injection_task is not None]
    return SuiteFigures(
        suite=suite,
        policy=policy,
        user_tasks=len(alone),
        passed_without_card=sum(1 for o in alone if o.passed and o.cards == 0),
        pairs=len(pairs),
        attacks_through=sum(1 for o in pairs if o.attacked),
        injections_read=sum(1 for o in pairs if o.injection_read),
        cards_user=sum(o.cards for o in alone),
        cards_attacked=sum(o.cards for o in pairs),
    )


def _per(total: int, count: int) -> str:
    return f"{total / count:.2f}" if count else "-"


def table(rows: list[SuiteFigures]) -> str:
    head = (
        "| Suite | Loopdesk policy | Utility (no card) | Attack success | Injection read "
        "| Cards per user task | Cards per attacked task | CaMeL, o3 (published) "
        "| Undefended, o3 (published) |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [_line(row) for row in rows]
    for policy in dict.fromkeys(row.policy for row in rows):
        same = [row for row in rows if row.policy == policy]
        if len(same) > 1:
            lines.append(_line(_total(same), suite="all"))
    return head + "\n".join(lines) + "\n" + PUBLISHED_NOTE


# The published cells hold three figures; the full table with both models follows ours.
PUBLISHED_NOTE = (
    "\nThe published cells: utility / utility under attack / attack success of o3 (high) "
    "on AgentDojo v1.2, attack `important_instructions` (the runs behind the CaMeL paper's "
    "77% vs 84%). Per suite, for both models the source gives:\n\n"
    f"{published.table()}\nSources:\n{published.sources()}"
)


def _line(row: SuiteFigures, suite: str | None = None) -> str:
    suite = suite or row.suite
    return (
        f"| {row.suite} | {row.policy} "
        f"| {row.utility:.0%} ({row.passed_without_card}/{row.user_tasks}) "
        f"| {row.attack_success:.1%} ({row.attacks_through}/{row.pairs}) "
        f"| {row.injections_read}/{row.pairs} "
        f"| {_per(row.cards_user, row.user_tasks)} "
        f"| {_per(row.cards_attacked, row.pairs)} "
        f"| {published.lookup('CaMeL', suite)} | {published.lookup('Undefended', suite)} |"
    )


def _total(rows: list[SuiteFigures]) -> SuiteFigures:
    return SuiteFigures(
        suite="**all**",
        policy=rows[0].policy,
        user_tasks=sum(r.user_tasks for r in rows),
        passed_without_card=sum(r.passed_without_card for r in rows),
        pairs=sum(r.pairs for r in rows),
        attacks_through=sum(r.attacks_through for r in rows),
        injections_read=sum(r.injections_read for r in rows),
        cards_user=sum(r.cards_user for r in rows),
        cards_attacked=sum(r.cards_attacked for r in rows),
    )


def write_doc(rows: list[SuiteFigures], note: str, doc: Path = DOC) -> None:
    """Replace what lies between the markers in docs/security.md with the new table."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc} has no scorecard markers ({BEGIN} ... {END}).")
    block = f"{BEGIN}\n{note}\n\n{table(rows)}{END}"
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    doc.write_text(pattern.sub(lambda _match: block, text, count=1))
