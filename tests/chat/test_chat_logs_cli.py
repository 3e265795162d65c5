"""`flask chat-logs CONVERSATION_ID [RUN_ID]`: an operator reads what a run did."""

from __future__ import annotations

import re

from tests.factories import run_log_entries
from tests.fake_model import Turn, api_error, text, tool_use


def _two_runs(app, chat, fake_model) -> tuple[int, int, int]:
    """A conversation with a run that used a tool, then a run the model failed."""
    fake_model.script(
        Turn(text("Let me look."), tool_use("list_offers", {})),
        Turn(text("You have no offers yet.")),
    )
    chat_id = chat.new_chat("Offers")
    first = chat.send(chat_id, "What do I sell?")
    chat.wait(first)
    run_log_entries(app, first)
    fake_model.script(*[api_error(529, "overloaded_error", "Overloaded")] * 4)
    second = chat.send(chat_id, "And now?")
    chat.wait(second)
    run_log_entries(app, second)
    return chat_id, first, second


def test_chat_logs_prints_every_run_of_the_conversation(app, chat, fake_model):
    chat_id, first, second = _two_runs(app, chat, fake_model)

    result = app.test_cli_runner().invoke(args=["chat-logs", str(chat_id)])

    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith(f"Conversation {chat_id} · 'Offers' · ada@example.com · ERROR · 2 runs")
    assert f"Run {first} · completed" in out
    assert f"Run {second} · error" in out
    lines = out.splitlines()
    model_calls = [line for line in lines if " model_call " in line]
    assert len(model_calls) == 3
    assert re.search(
        r"in \d[\d,]* / out \d[\d,]* tokens · stop tool_use · [\d,]+ ms", model_calls[0]
    )
    assert "stop end_turn" in model_calls[1]
    assert "tool_choice auto" in model_calls[0]
    assert "ERROR overloaded_error: Overloaded" in model_calls[2]
    (tool_line,) = [line for line in lines if " tool_call " in line]
    assert re.search(r"list_offers · \d+ ms · input \{\} · output .*offers", tool_line)
    assert any(" frames " in line and "done ×1" in line for line in lines)
    assert any(
        " error " in line and "overloaded_error: The model is busy" in line for line in lines
    )
    # Every entry line starts with its offset from the run's start.
    assert all(re.match(r"\s+\+\d+\.\d{3}s ", line) for line in model_calls + [tool_line])


def test_chat_logs_for_one_run(app, chat, fake_model):
    chat_id, first, second = _two_runs(app, chat, fake_model)

    result = app.test_cli_runner().invoke(args=["chat-logs", str(chat_id), str(second)])

    assert result.exit_code == 0, result.output
    assert "1 run" in result.output.splitlines()[0]
    assert f"Run {second} · error" in result.output
    assert f"Run {first} " not in result.output
    assert "tool_call" not in result.output


def test_chat_logs_full_shows_tool_output_as_stored(app, chat, fake_model):
    long_name = "Offer " + "word " * 60
    fake_model.script(
        Turn(tool_use("save_character", {"name": "Mo", "description": long_name})),
        Turn(text("Saved.")),
    )
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Save Mo")
    chat.wait(run_id)
    run_log_entries(app, run_id)
    runner = app.test_cli_runner()

    short = runner.invoke(args=["chat-logs", str(chat_id)]).output
    full = runner.invoke(args=["chat-logs", str(chat_id), "--full"]).output

    assert " ".join(long_name.split()) not in short
    assert " ".join(long_name.split()) in full


def test_chat_logs_refuses_unknown_conversation_and_foreign_run(app, chat, fake_model):
    fake_model.script("Hi.", "Hello.")
    mine = chat.new_chat()
    other = chat.new_chat()
    chat.wait(chat.send(mine, "Hi"))
    other_run = chat.send(other, "Hello")
    chat.wait(other_run)
    runner = app.test_cli_runner()

    result = runner.invoke(args=["chat-logs", "999999"])
    assert result.exit_code != 0
    assert "No conversation 999999." in result.output

    result = runner.invoke(args=["chat-logs", str(mine), str(other_run)])
    assert result.exit_code != 0
    assert f"Run {other_run} is not a run of conversation {mine}." in result.output

    result = runner.invoke(args=["chat-logs", str(mine), "424242"])
    assert result.exit_code != 0
    assert "Run 424242 is not a run of conversation" in result.output
