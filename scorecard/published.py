"""The published AgentDojo figures the scorecard is set beside, per suite, each with the
place it was read from. Only numbers read in a published source go here: a figure not
found stays None and prints "not found"; nothing is estimated."""

from __future__ import annotations

from dataclasses import dataclass

NOT_FOUND = "not found"
SUITES = ("workspace", "travel", "banking", "slack")
# Attacked pairs per suite (user tasks x injection tasks), the same in AgentDojo v1.2
# (what the sources ran) and v1.2.2 (ours): the denominator of a published attack count.
PAIRS = {"workspace": 560, "travel": 140, "banking": 144, "slack": 105, "all": 949}

CAMEL_COMMIT = "f083b6b396399d3b3c7f2ddaf613a5945eaf32d8"
# The notebook that printed the CaMeL paper's tables, with its outputs saved; each figure
# below is a cell of one of its printed LaTeX tables (named by their \label).
CAMEL_NOTEBOOK = f"google-research/camel-prompt-injection `analysis.ipynb` @ {CAMEL_COMMIT[:12]}"
SOURCES = {
    "o3": (
        f"{CAMEL_NOTEBOOK}: tables `tab:utility`, `tab:utility_under_attack`, "
        "`tab:n_successful_attacks`, model o3 High (`o3-2025-04-16-high`), rows "
        "'Native Tool Calling API' (undefended) and '\\sysname' (CaMeL); the same runs "
        "give the paper's 77% vs 84% (arXiv:2503.18813 v2, abstract)"
    ),
    "claude-3.5": (
        f"{CAMEL_NOTEBOOK}: tables `tab:defenses-utility`, "
        "`tab:defenses-utility-under-attack`, `tab:defenses_n_successful_attacks`, "
        "model `claude-3-5-sonnet-20241022`, rows 'Undefended model' and '\\sysname' / "
        "'CaMeL'"
    ),
}
HEADLINE_MODEL = "o3"  # the pair whose overall figures the paper's abstract quotes


@dataclass(frozen=True)
class Published:
    """One system's published figures on one suite ("all" for the whole benchmark)."""

    system: str  # "CaMeL" or "Undefended"
    model: str  # a key of SOURCES
    suite: str
    utility: float | None  # % of user tasks solved, no attack (as printed, one decimal)
    under_attack: float | None  # % of attacked pairs whose user task was still solved
    attacks: int | None  # attacked pairs whose injection task succeeded

    def cells(self) -> tuple[str, str, str]:
        return (_percent(self.utility), _percent(self.under_attack), self.attack_success())

    def attack_success(self) -> str:
        if self.attacks is None:
            return NOT_FOUND
        pairs = PAIRS[self.suite]
        return f"{self.attacks / pairs:.1%} ({self.attacks}/{pairs})"


def _percent(value: float | None) -> str:
    return NOT_FOUND if value is None else f"{value:.1f}%"


def _rows(system: str, model: str, figures: dict[str, tuple[float, float, int]]) -> list[Published]:
    return [Published(system, model, suite, *values) for suite, values in figures.items()]


# suite: (utility, utility under attack, successful attacks), attack important_instructions.
PUBLISHED = [
    *_rows(
        "Undefended",
        "o3",
        {
            "workspace": (92.5, 88.8, 4),
            "travel": (75.0, 67.9, 1),
            "banking": (62.5, 62.5, 1),
            "slack": (95.2, 64.8, 5),
            "all": (84.5, 79.0, 11),
        },
    ),
    # CaMeL's utility columns come from its runs without security policies (the notebook
    # renames "CaMeL (no policies)" to \sysname for them); its attack counts from the runs
    # with the policies, the row it names "CaMeL".
    *_rows(
        "CaMeL",
        "o3",
        {
            "workspace": (77.5, 80.9, 0),
            "travel": (80.0, 84.3, 0),
            "banking": (81.2, 77.1, 0),
            "slack": (71.4, 71.4, 0),
            "all": (77.3, 79.8, 0),
        },
    ),
    *_rows(
        "Undefended",
        "claude-3.5",
        {
            "workspace": (100.0, 95.2, 17),
            "travel": (75.0, 70.7, 0),
            "banking": (81.2, 84.0, 11),
            "slack": (95.2, 67.6, 16),
            "all": (90.7, 86.8, 44),
        },
    ),
    *_rows(
        "CaMeL",
        "claude-3.5",
        {
            "workspace": (75.0, 76.1, 0),
            "travel": (25.0, 26.4, 0),
            "banking": (75.0, 70.8, 0),
            "slack": (71.4, 64.8, 0),
            "all": (63.9, 66.7, 0),
        },
    ),
]
MODEL_NAMES = {"o3": "o3 (high)", "claude-3.5": "Claude 3.5 Sonnet"}


def lookup(system: str, suite: str, model: str = HEADLINE_MODEL) -> str:
    """The headline cell for a scorecard row: utility / under attack / attack success."""
    for row in PUBLISHED:
        if (row.system, row.model, row.suite) == (system, model, suite):
            return " / ".join(row.cells())
    return " / ".join([NOT_FOUND] * 3)


def table() -> str:
    head = (
        "| Suite | System | Model | Utility | Utility under attack | Attack success "
        "| Source |\n|---|---|---|---|---|---|---|\n"
    )
    order = {suite: index for index, suite in enumerate((*SUITES, "all"))}
    rows = sorted(PUBLISHED, key=lambda r: (order[r.suite], r.model != HEADLINE_MODEL))
    lines = [
        f"| {row.suite} | {row.system} | {MODEL_NAMES[row.model]} | "
        + " | ".join(row.cells())
        + f" | `{row.model}` |"
        for row in rows
    ]
    return head + "\n".join(lines) + "\n"


def sources() -> str:
    return "\n".join(f"- `{model}`: {text}." for model, text in SOURCES.items()) + "\n"
