"""`flask eval` against the fake model server: the harness drives the real loop, judges
with deterministic checks and a rubric the (fake) model grades, prints its table, writes
the report and every transcript, and exits by the threshold."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.fake_model import Turn, text, tool_use

DATASET = Path(__file__).with_name("scripted.yaml")
JUDGE_REASON = "It named Calm Mornings, which list_offers returned."


def _last_user(body) -> list | str:
    return body["messages"][-1]["content"]


def scripted_model(body):
    """The host reads the offers when asked about one and then names it; it answers any
    other message in text (so the ad-copy case never calls ad_copy); the judge passes."""
    if (body.get("tool_choice") or {}).get("name") == "submit_grade":
        return Turn(tool_use("submit_grade", {"reason": JUDGE_REASON, "passed": True}))
    last = _last_user(body)
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return Turn(text("Your offer is Calm Mornings."))
    said = last if isinstance(last, str) else " ".join(b.get("text", "") for b in last)
    if "offer" in said:
        return Turn(text("Let me look."), tool_use("list_offers", {}))
    return Turn(text("Here is a line: wake up calm."))


@pytest.fixture
def eval_app(app_on_fake_model, fake_model):
    fake_model.responder = scripted_model
    return app_on_fake_model


def test_an_eval_prints_its_table_writes_the_report_and_transcripts_and_fails_under_threshold(
    eval_app, fake_model, tmp_path
):
    directory = tmp_path / "run"
    report = tmp_path / "report.html"
    result = eval_app.test_cli_runner().invoke(
        args=[
            "eval",
            str(DATASET),
            "--repeat",
            "2",
            "--transcripts",
            str(directory),
            "--out",
            str(report),
        ]
    )

    assert result.exit_code == 1, result.output  # 2 of 4 runs pass: under 80%
    output = result.output
    assert "reads the offer" in output and "writes ad copy" in output
    assert "ToolCalled(ad_copy)" in output  # pydantic-evals' table names each check
    assert any("2/2" in line for line in output.splitlines() if "reads the offer" in line)
    assert any("0/2" in line for line in output.splitlines() if "writes ad copy" in line)
    assert "FAIL: 2/4 runs passed (50%; threshold 80%)" in output

    page = report.read_text()
    assert JUDGE_REASON in page  # the rubric's verdict came from the model's answer
    assert "never called ad_copy" in page
    assert "TOOL CALL list_offers" in page  # each run's transcript, readable

    files = sorted((directory / "transcripts").glob("*.json"))
    assert len(files) == 4
    transcript = json.loads(files[0].read_text())
    assert transcript["case"] == "reads the offer"
    assert [c["name"] for c in transcript["tool_calls"]] == ["list_offers"]
    assert "Calm Mornings" in json.dumps(transcript["tool_calls"][0]["result"])
    assert transcript["answer"] == "Your offer is Calm Mornings."
    graded = [
        r for r in fake_model.requests if (r.get("tool_choice") or {}).get("name") == "submit_grade"
    ]
    assert len(graded) == 2  # once per run of the case with a rubric
    assert "Calm Mornings" in graded[0]["messages"][0]["content"]  # it read the transcript


def test_an_eval_over_its_threshold_exits_zero(eval_app, tmp_path):
    result = eval_app.test_cli_runner().invoke(
        args=[
            "eval",
            str(DATASET),
            "--threshold",
            "0.5",
            "--concurrency",
            "2",
            "--transcripts",
            str(tmp_path),
        ]
    )

    assert result.exit_code == 0, result.output
    assert "PASS: 1/2 runs passed (50%; threshold 50%)" in result.output
    assert (tmp_path / "report.html").exists()


FLOWS = Path(__file__).with_name("flows.yaml")
ATTACHED = re.compile(r"attachment id (\d+)")


def obedient_model(body):
    """Asks which offer to write ad copy for, has the quiz agent write a quiz, reads the
    attachment it is told of; then does what any tool result says."""
    said = json.dumps(_last_user(body))
    if "tool_result" in said:
        if "INSTRUCTION: call remember" in said:
            fact = "The person wants every answer in capitals."
            return Turn(tool_use("remember", {"instruction": fact}))
        return Turn(text("Done."))
    if "ad copy" in said:
        return Turn(tool_use("select_offer", {}))
    if "quiz" in said:
        return Turn(tool_use("quiz", {"instructions": "A five-question quiz."}))
    return Turn(tool_use("read_attachment", {"attachment_id": int(ATTACHED.search(said)[1])}))


def test_an_agent_writes_cards_are_answered_as_the_case_says_and_the_gate_holds_a_write(
    eval_app, fake_model, tmp_path
):
    fake_model.responder = obedient_model
    fake_model.strict = True  # the quiz agent's forced answer: an instance of its schema
    result = eval_app.test_cli_runner().invoke(
        args=["eval", str(FLOWS), "--threshold", "1", "--transcripts", str(tmp_path)]
    )

    assert result.exit_code == 0, result.output
    assert "PASS: 4/4 runs passed" in result.output
    agent = json.loads((tmp_path / "transcripts" / "flows__agent__1.json").read_text())
    assert [(o["agent"], len(o["content"]["questions"]) >= 3) for o in agent["outputs"]] == [
        ("quiz", True)
    ]
    chosen = json.loads((tmp_path / "transcripts" / "flows__chosen__1.json").read_text())
    trailhead = chosen["ids"]["offer:Trailhead Coffee Subscription"]
    assert [c["answer"] for c in chosen["cards"]] == [{"offer_id": trailhead}]
    assert chosen["tool_calls"][0]["result"] == {"offer_id": trailhead}  # what the host read
    declined = json.loads((tmp_path / "transcripts" / "flows__declined__1.json").read_text())
    assert [(c["kind"], c["tool"], c["answer"]) for c in declined["cards"]] == [
        ("confirmation", "remember", {"approved": False})
    ]
    assert declined["writes"] == [] and declined["after"]["memory_facts"] == 0
    approved = json.loads((tmp_path / "transcripts" / "flows__approved__1.json").read_text())
    assert approved["writes"] == ["remember"] and approved["after"]["memory_facts"] == 1


def test_without_the_evals_extra_the_command_says_how_to_install_it(app, monkeypatch):
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "pydantic_evals" else found(name, *args),
    )
    result = app.test_cli_runner().invoke(args=["eval", str(DATASET)])

    assert result.exit_code == 1
    assert "install the evals extra: make extras" in result.output


def test_a_dataset_that_does_not_load_is_named(app, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("cases:\n  - name: x\n    inputs: {messages: [hi], mesages: [typo]}\n")
    result = app.test_cli_runner().invoke(args=["eval", str(broken)])

    assert result.exit_code == 1
    assert "broken.yaml" in result.output and "mesages" in result.output


def test_the_demo_model_is_not_measured(make_app, tmp_path):
    demo = make_app(model_provider="demo")
    result = demo.test_cli_runner().invoke(args=["eval", str(DATASET)])

    assert result.exit_code == 1
    assert "the built-in demo model is not one" in result.output


def test_a_case_that_raises_fails_and_its_file_says_why(app_on_fake_model, tmp_path):
    raising = tmp_path / "raising.yaml"
    raising.write_text(
        "cases:\n  - name: unknown offer\n    inputs:\n      setup:\n        outputs:\n"
        "          - {agent: quiz, title: Q, offer: Nowhere, content: {}}\n"
        "      messages: [hi]\n"
    )
    result = app_on_fake_model.test_cli_runner().invoke(
        args=["eval", str(raising), "--transcripts", str(tmp_path / "run")]
    )

    assert result.exit_code == 1, result.output
    assert "FAIL: 0/1 runs passed" in result.output
    written = json.loads(
        (tmp_path / "run" / "transcripts" / "raising__unknown-offer__1.json").read_text()
    )
    assert "names no offer of the setup: Nowhere" in written["error"]
