"""The context budget: requests fit the window on the first try, compaction summarizes
older rows incrementally, and the summary call fits too. The fake model rejects any
request over its window using its own count (ceil(chars / 4))."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.chat.compaction import summary_cap_tokens
from app.chat.models import Conversation, Message
from app.chat.rows import insert_message
from app.tools.registry import READ, NoInput, Tool, tool
from tests.factories import ChatDriver
from tests.fake_model import Turn, count_request_tokens, text, tool_use

SUMMARY_MARK = "You keep the running summary"


def _is_summary(body) -> bool:
    return SUMMARY_MARK in str(body.get("system", ""))


def _driver(make_app, fake_model, auth, **settings):
    # A generous message cap, so the token budget (not the count) decides what is sent.
    settings.setdefault("history_message_cap", 400)
    settings.setdefault("max_message_chars", 1_000_000)
    app = make_app(anthropic_base_url=fake_model.base_url, **settings)
    auth.app, auth.client = app, app.test_client()
    auth.create()
    auth.login()
    return app, ChatDriver(app, auth.client, auth)


def _words(count: int, seed: str) -> str:
    """Prose of about `count` characters."""
    sentence = f"{seed} keeps notes about offers, personas and launch plans for the spring. "
    return (sentence * (count // len(sentence) + 1))[:count]


def _fill(app, chat_id, pairs: int, chars_per_message: int) -> None:
    with app.extensions["database"].session() as session:
        for n in range(pairs):
            question = _words(chars_per_message, f"question {n}")
            answer = _words(chars_per_message // 4, f"answer {n}")
            insert_message(
                session,
                chat_id,
                role="user",
                kind="user",
                content=question,
                meta={"blocks": [{"type": "text", "text": question}]},
            )
            insert_message(
                session,
                chat_id,
                role="assistant",
                kind="host",
                content=answer,
                meta={"blocks": [{"type": "text", "text": answer}]},
            )
        session.commit()


def _summaries_then(fake_model, final_text="Here is my answer."):
    def respond(body):
        if _is_summary(body):
            return Turn(
                text("Summary: the person plans a spring launch; offers and personas discussed.")
            )
        return Turn(text(final_text))

    fake_model.responder = respond


def _big_tools(count: int, chars: int) -> list[Tool]:
    return [
        tool(
            name=f"catalogue_lookup_{n}",
            description=_words(chars, f"lookup {n}"),
            category=READ,
            input=NoInput,
            handler=lambda ctx, args: "ok",
        )
        for n in range(count)
    ]


def test_the_seed_case_fits_on_the_first_try(make_app, fake_model, auth):
    # 52,000 tokens reserved for output (8,192 + a 43,808 thinking budget), about 12,000
    # tokens of tool schemas, and 148,628 tokens of conversation text (by the fake's count).
    app, chat = _driver(make_app, fake_model, auth, thinking_budget=43_808)
    tools = app.extensions["services"].tools
    for big in _big_tools(16, 2_200):
        tools.add(big)
    chat_id = chat.new_chat()
    _fill(app, chat_id, pairs=40, chars_per_message=11_891)
    _summaries_then(fake_model)

    run = chat.wait(chat.send(chat_id, "What should we do next?"), timeout=60)

    assert run["status"] == "completed", run
    assert fake_model.rejections == []
    host = [r for r in fake_model.requests if not _is_summary(r)]
    assert len(host) == 1, "the host request went through on the first try"
    request = host[0]
    assert request["max_tokens"] == 52_000
    tool_tokens = count_request_tokens({"tools": request["tools"]})
    assert 11_000 < tool_tokens < 13_500
    assert count_request_tokens(request) + request["max_tokens"] <= 200_000
    with app.extensions["database"].session() as session:
        conversation = session.get(Conversation, chat_id)
        assert conversation.summary and conversation.summarized_up_to_sequence > 0
    assert any(r["kind"] == "notice" and r.get("summary") for r in chat.rows(chat_id))


def test_huge_pasted_documents_are_summarized_and_every_call_fits(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth)
    chat_id = chat.new_chat()
    # Twelve user messages holding about 235,000 tokens of pasted documents.
    _fill(app, chat_id, pairs=11, chars_per_message=78_000)
    _summaries_then(fake_model)

    run = chat.wait(chat.send(chat_id, _words(78_000, "document twelve")), timeout=60)

    assert run["status"] == "completed", run
    assert fake_model.rejections == []
    summaries = [r for r in fake_model.requests if _is_summary(r)]
    assert summaries, "older rows were summarized"
    for body in fake_model.requests:
        assert count_request_tokens(body) + body["max_tokens"] <= 200_000
    host = [r for r in fake_model.requests if not _is_summary(r)][0]
    # The recent window is sized in tokens: the newest document is there, the oldest not.
    sent = str(host["messages"])
    assert "document twelve" in sent and "question 0 " not in sent
    assert "Summary: the person plans" in host["system"]


def test_a_single_row_too_large_is_truncated_in_the_request_and_kept_whole(
    make_app, fake_model, auth
):
    app, chat = _driver(make_app, fake_model, auth)
    chat_id = chat.new_chat()
    document = _words(900_000, "giant paste")
    _summaries_then(fake_model)

    run = chat.wait(chat.send(chat_id, document), timeout=60)

    assert run["status"] == "completed", run
    assert fake_model.rejections == []
    sent = fake_model.requests[-1]["messages"][-1]["content"][0]["text"]
    assert "characters not shown here" in sent and len(sent) < len(document)
    with app.extensions["database"].session() as session:
        row = session.scalar(
            select(Message).where(Message.conversation_id == chat_id, Message.kind == "user")
        )
        assert row.content == document.strip()


def test_a_step_with_thinking_on_reserves_its_budget(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth, thinking_budget=4_096)
    chat_id = chat.new_chat()
    fake_model.script(Turn(text("Thinking step.")))
    chat.wait(chat.send(chat_id, "Think about it"))
    on = fake_model.requests[-1]
    assert on["thinking"]["budget_tokens"] == 4_096 and on["max_tokens"] == 8_192 + 4_096


def test_a_step_with_thinking_off_reserves_no_thinking_budget(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth)
    fake_model.script(Turn(text("No thinking here.")))
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Quick question"))
    request = fake_model.requests[-1]
    assert "thinking" not in request and request["max_tokens"] == 8_192


def test_continuing_a_turn_made_without_thinking_runs_without_it(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth, thinking_budget=4_096)
    chat_id = chat.new_chat()
    with app.extensions["database"].session() as session:
        insert_message(
            session,
            chat_id,
            role="user",
            kind="user",
            content="list them",
            meta={"blocks": [{"type": "text", "text": "list them"}]},
        )
        insert_message(
            session,
            chat_id,
            role="assistant",
            kind="card",
            content="",
            meta={
                "blocks": [
                    {
                        "type": "tool_use",
                        "id": "toolu_old",
                        "name": "ask_user",
                        "input": {"question": "Which?"},
                    }
                ],
                "awaiting": "toolu_old",
                "card": {
                    "toolUseId": "toolu_old",
                    "tool": "ask_user",
                    "status": "awaiting",
                    "kind": "questionnaire",
                    "title": "Which?",
                    "resultKey": "value",
                    "freeTextKey": "text",
                    "steps": [
                        {
                            "id": "value",
                            "title": "Which?",
                            "input": "text",
                            "options": [],
                            "required": True,
                            "allowFreeText": True,
                            "maxLength": 2000,
                            "placeholder": "",
                        }
                    ],
                },
            },
        )
        session.commit()
    fake_model.script(Turn(text("Thanks.")))
    response = chat.answer(chat_id, "toolu_old", {"text": "the first"})
    chat.wait(response.get_json()["runId"])
    request = fake_model.requests[-1]
    assert fake_model.rejections == []
    assert "thinking" not in request and request["max_tokens"] == 8_192


def test_a_context_length_refusal_compacts_harder_once_then_succeeds(make_app, fake_model, auth):
    app, chat = _driver(make_app, fake_model, auth)
    fake_model.context_window = 60_000  # smaller than the app believes: the first try is refused
    chat_id = chat.new_chat()
    _fill(app, chat_id, pairs=12, chars_per_message=20_000)
    _summaries_then(fake_model)

    run = chat.wait(chat.send(chat_id, "And now?"), timeout=60)

    assert run["status"] == "completed", run
    refusals = [r for r in fake_model.rejections if "prompt is too long" in r]
    assert len(refusals) == 1
    assert chat.rows(chat_id)[-1]["content"] == "Here is my answer."


def test_when_even_compaction_cannot_fit_the_run_ends_with_a_clear_error(
    make_app, fake_model, auth
):
    app, chat = _driver(make_app, fake_model, auth)
    fake_model.context_window = 9_000  # smaller than the tool schemas alone
    chat_id = chat.new_chat()
    _fill(app, chat_id, pairs=4, chars_per_message=4_000)
    _summaries_then(fake_model)

    run = chat.wait(chat.send(chat_id, "Hello?"), timeout=60)

    assert run["status"] == "error"
    last = chat.rows(chat_id)[-1]
    assert last["kind"] == "error" and "no longer fits" in last["content"]
    assert len([r for r in fake_model.requests if not _is_summary(r)]) == 2, (
        "retried once, not six times"
    )


@pytest.mark.timeout(300)
def test_repeated_compaction_over_a_300_turn_conversation(make_app, fake_model, auth):
    window = 40_000
    app, chat = _driver(
        make_app,
        fake_model,
        auth,
        context_window_tokens=window,
        rate_limit_messages="1000 per minute",
    )
    fake_model.context_window = window
    chat_id = chat.new_chat()
    long_summary = _words(40_000, "summary")

    def respond(body):
        if _is_summary(body):
            return Turn(text(long_summary))  # longer than its cap: it must be cut
        last = body["messages"][-1]["content"]
        if any(block.get("type") == "tool_result" for block in last):
            return Turn(text("Those are your offers."))
        turn_number = len(body["messages"])
        if turn_number % 5 == 0:
            return Turn(text("Let me check."), tool_use("list_offers", {}))
        return Turn(text(_words(600, f"reply {turn_number}")))

    fake_model.responder = respond
    for turn in range(300):
        run = chat.wait(chat.send(chat_id, _words(1_500, f"turn {turn}")), timeout=30)
        assert run["status"] == "completed", (turn, run)

    assert fake_model.rejections == [], "every request fit and no tool pair was ever split"
    with app.extensions["database"].session() as session:
        conversation = session.get(Conversation, chat_id)
        cap_chars = summary_cap_tokens(window) * 3 + 200
        assert len(conversation.summary) <= cap_chars
    summaries = [r for r in fake_model.requests if _is_summary(r)]
    assert len(summaries) >= 3, "compaction happened repeatedly"
