"""A finished run keeps its steps: a collapsed "N steps" summary beside its first row, in
plain words, with links to what agents wrote; rendered from the row after a reload, run
logs or not."""

from __future__ import annotations

import re

import pytest

from app.llm.demo import agent_output
from app.workspace.models import Offer
from tests.fake_model import Turn, api_error, text, tool_use
from tests.waiting import eventually


@pytest.fixture
def app(make_app, fake_model):
    # Run logs off: the steps must not depend on them.
    return make_app(anthropic_base_url=fake_model.base_url, run_logs=False)


def _offer(app, user_id) -> int:
    with app.extensions["database"].session() as session:
        offer = Offer(user_id=user_id, name="Calm Mornings", description="Coaching")
        session.add(offer)
        session.commit()
        return offer.id


def _summary(html: str) -> list[str]:
    return re.findall(r'<details class="run-steps".*?</details>', html, re.S)


def test_steps_stay_after_the_run_in_plain_words_with_links_to_results(app, chat, fake_model):
    offer_id = _offer(app, chat.user_id)
    fake_model.script(
        Turn(text("Let me check your offers."), tool_use("list_offers", {})),
        Turn(text("Which one?"), tool_use("select_offer", {"prompt": "Which offer?"})),
    )
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Ads for my coaching"))["status"] == "awaiting"
    card = next(r for r in chat.rows(chat_id) if r["kind"] == "card")["card"]

    fake_model.script(
        Turn(
            text("Writing your ads."),
            tool_use("ad_copy", {"instructions": "Ads", "offer_id": offer_id}),
        ),
        Turn(tool_use("submit_ad_copy", agent_output("ad-copy", {"name": "Calm Mornings"}))),
        Turn(text("Here are your ads.")),
    )
    response = chat.answer(chat_id, card["toolUseId"], {"offer_id": offer_id})
    assert chat.wait(response.get_json()["runId"])["status"] == "completed"

    rows = chat.rows(chat_id)
    kept = [r for r in rows if "steps" in r]
    assert [r["content"] for r in kept] == ["Let me check your offers.", "Writing your ads."]
    first, second = (r["steps"] for r in kept)
    assert [s["label"] for s in first["items"]] == [
        "Looked up your offers",
        "Asked you to choose an offer",
    ]
    assert all(s["ok"] and isinstance(s["ms"], int) for s in first["items"])
    output_id = next(r for r in rows if r["kind"] == "agent_output")["agentOutput"]["outputId"]
    assert second["items"] == [
        {
            "tool": "ad_copy",
            "label": "Wrote ad copy",
            "ms": second["items"][0]["ms"],
            "ok": True,
            "outputId": output_id,
        }
    ]
    assert first["runId"] != second["runId"]

    # A reload renders them from the rows.
    html = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    summaries = _summary(html)
    assert len(summaries) == 2
    assert "2 steps" in summaries[0] and "1 step<" in summaries[1]
    assert "Looked up your offers" in summaries[0]
    assert "Asked you to choose an offer" in summaries[0]
    assert "Wrote ad copy" in summaries[1]
    assert f'href="/workspace/outputs/{output_id}"' in summaries[1]
    assert all("list_offers" not in s and "select_offer" not in s for s in summaries)
    # Beside the run's first row: inside it, before its text.
    article = html.split(f'<article id="m-{kept[0]["sequence"]}"', 1)[1].split("</article>")[0]
    assert article.index("run-steps") < article.index("Let me check your offers.")


def test_open_pages_get_the_row_again_with_its_steps(app, chat, fake_model):
    fake_model.script(
        Turn(text("Looking."), tool_use("list_offers", {})),
        Turn(text("You have no offers yet.")),
    )
    chat_id = chat.new_chat()
    subscription = app.extensions["services"].hub.subscribe(chat_id)
    chat.wait(chat.send(chat_id, "What do I sell?"))
    events = []
    while not events or events[-1].kind != "done":
        event = subscription.get(timeout=5)
        assert event is not None, "no done"
        events.append(event)
    subscription.close()
    pushed = [e for e in events if e.kind == "message" and "steps" in e.row]
    assert len(pushed) == 1 and pushed[0].row["content"] == "Looking."
    assert events.index(pushed[0]) < events.index(next(e for e in events if e.kind == "done"))


def test_a_run_without_tools_has_no_summary(app, chat, fake_model):
    fake_model.script(Turn(text("Hello!")))
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Hi"))
    assert all("steps" not in r for r in chat.rows(chat_id))
    assert _summary(chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)) == []


def test_a_failed_run_keeps_the_steps_it_took(app, chat, fake_model):
    fake_model.script(
        Turn(text("Looking."), tool_use("list_offers", {})),
        api_error(400, "invalid_request_error", "bad"),
    )
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "What do I sell?"))["status"] == "error"
    # A failed run keeps its steps in a transaction of its own, just after its status.
    kept = eventually(
        lambda: [r for r in chat.rows(chat_id) if "steps" in r],
        5,
        "the failed run's steps were never kept",
    )
    assert [s["label"] for s in kept[0]["steps"]["items"]] == ["Looked up your offers"]


def test_a_refused_call_is_a_step_that_did_not_work(app, chat, fake_model):
    fake_model.script(
        Turn(tool_use("get_offer", {"offer_id": 4242})),
        Turn(text("That offer does not exist.")),
    )
    chat_id = chat.new_chat()
    chat.wait(chat.send(chat_id, "Open offer 4242"))
    [row] = [r for r in chat.rows(chat_id) if "steps" in r]
    assert row["content"] == "That offer does not exist."  # the first row the run showed
    assert row["steps"]["items"][0]["label"] == "Read an offer"
    assert row["steps"]["items"][0]["ok"] is False
    html = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert "did not work" in _summary(html)[0]
