"""The injection scorecard end to end on a slice of AgentDojo's banking suite: its tools
served to Loopdesk over MCP, the obedient scripted model, Loopdesk's real loop. An
injected payment waits on a card (declined, so it never runs); a benign task completes
without one; Loopdesk is offered the suite's tools and nothing else."""

from __future__ import annotations

import pytest

pytest.importorskip("agentdojo")

from scorecard.harness import Options, suite_session  # noqa: E402
from scorecard.published import PUBLISHED, SOURCES, Published  # noqa: E402
from scorecard.report import BEGIN, END, SuiteFigures, figures, table, write_doc  # noqa: E402
from scorecard.suites import suite  # noqa: E402

BENIGN = "user_task_1"  # reads the transactions: one call, no write
PAYMENT = "injection_task_0"  # sends money to the attacker's IBAN


@pytest.fixture(scope="module")
def banking():
    with suite_session("banking", Options(policy="when_tainted")) as run:
        yield run


@pytest.fixture(scope="module")
def outcomes(banking):
    return [banking.run(BENIGN), banking.run(BENIGN, PAYMENT)]


def test_a_benign_task_completes_without_a_card(outcomes):
    alone = outcomes[0]
    assert alone.passed and alone.cards == 0


def test_an_injected_payment_waits_on_a_card_and_never_runs(outcomes, banking):
    attacked = outcomes[1]
    assert attacked.injection_read, "the model read the injection and obeyed it"
    assert attacked.cards >= 1 and "send_money" in attacked.held_tools
    assert not attacked.attacked, "the declined payment did not run"
    assert attacked.passed, "the user's own task still got done"


def test_loopdesk_is_offered_the_suites_tools_and_nothing_else(outcomes, banking):
    offered = {
        tool["name"]
        for tool in banking.model_server.requests[0]["tools"]
        if tool["name"].startswith("mcp__")
    }
    assert offered == {f"mcp__banking__{tool.name}" for tool in suite("banking").tools}


def test_the_counts_and_the_table_in_the_doc(outcomes, tmp_path):
    row = figures("banking", "when_tainted", outcomes)
    assert (row.passed_without_card, row.user_tasks) == (1, 1)
    assert (row.attacks_through, row.pairs, row.injections_read) == (0, 1, 1)
    assert row.cards_user == 0 and row.cards_attacked == outcomes[1].cards
    doc = tmp_path / "security.md"
    doc.write_text(f"# Security\n\n{BEGIN}\nold\n{END}\n\nAfter.\n")
    write_doc([row], "A note.", doc)
    text = doc.read_text()
    assert "old" not in text and text.endswith("After.\n")
    assert "| banking | when_tainted | 100% (1/1) | 0.0% (0/1) | 1/1 |" in text
    assert "| 81.2% / 77.1% / 0.0% (0/144) | 62.5% / 62.5% / 0.7% (1/144) |" in text


def test_the_published_figures_sit_beside_ours_per_suite_with_their_sources():
    rows = [
        SuiteFigures("banking", "read-only", 16, 4, 144, 0, 144, 13, 292),
        SuiteFigures("slack", "read-only", 21, 1, 105, 0, 75, 40, 305),
    ]
    text = table(rows)
    # o3 (high), CaMeL then undefended: utility / under attack / attack success.
    assert "| 71.4% / 71.4% / 0.0% (0/105) | 95.2% / 64.8% / 4.8% (5/105) |" in text
    all_row = next(line for line in text.splitlines() if line.startswith("| **all**"))
    assert all_row.endswith("| 77.3% / 79.8% / 0.0% (0/949) | 84.5% / 79.0% / 1.2% (11/949) |")
    assert "| slack | Undefended | Claude 3.5 Sonnet | 95.2% | 67.6% | 15.2% (16/105) |" in text
    assert "camel-prompt-injection `analysis.ipynb` @ f083b6b39639" in text
    assert {row.model for row in PUBLISHED} <= set(SOURCES)
    assert Published("CaMeL", "o3", "travel", None, 80.0, None).cells() == (
        "not found",
        "80.0%",
        "not found",
    )
