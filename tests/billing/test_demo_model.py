"""The built-in demo model is recorded as itself (run logs, usage) and costs nothing: a
person's allowance is not spent on its scripted replies, whatever HOST_MODEL says."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.billing.quota import credits_used, month_of
from app.chat.models import RunLogEntry
from app.chat.run_log import MODEL_CALL
from app.config import DEFAULT_HOST_MODEL
from app.llm.demo import DEMO_MODEL_NAME
from tests.billing import metered
from tests.factories import ChatDriver, set_allowance


@pytest.fixture
def app(make_app):
    # HOST_MODEL is set, and weighs 3 credits: the demo answers all the same.
    return make_app(
        model_provider="demo",
        anthropic_base_url=None,
        host_model=DEFAULT_HOST_MODEL,
        model_credit_weights={DEFAULT_HOST_MODEL: 3},
    )


@pytest.fixture
def chat(app, auth):
    """Ada, an admin (she reads Admin > Usage too), on the demo model."""
    user_id = auth.create(admin=True)
    auth.login()
    driver = ChatDriver(app, auth.client, auth)
    driver.user_id = user_id
    return driver


def _model_calls(app, run_id) -> list[dict]:
    with app.extensions["database"].session() as session:
        return [
            entry.data
            for entry in session.scalars(
                select(RunLogEntry)
                .where(RunLogEntry.run_id == run_id, RunLogEntry.kind == MODEL_CALL)
                .order_by(RunLogEntry.id)
            )
        ]


def test_the_run_log_names_the_demo_model(app, chat):
    chat_id = chat.new_chat()
    run_id = chat.send(chat_id, "Write me an ad")
    assert chat.wait(run_id)["status"] == "completed"  # no offers: a pointer to add one

    calls = _model_calls(app, run_id)
    assert calls and {call["model"] for call in calls} == {DEMO_MODEL_NAME}
    logs = app.test_cli_runner().invoke(args=["chat-logs", str(chat_id)])
    assert logs.exit_code == 0, logs.output
    assert DEMO_MODEL_NAME in logs.output and DEFAULT_HOST_MODEL not in logs.output


def test_demo_replies_are_metered_as_the_demo_model_at_no_cost(app, chat):
    set_allowance(app, chat.user_id, 1)
    chat_id = chat.new_chat()
    assert chat.wait(chat.send(chat_id, "Write me an ad"))["status"] == "completed"
    # A second reply is allowed: the first spent nothing of the one credit.
    assert chat.wait(chat.send(chat_id, "And another"))["status"] == "completed"

    events = metered(app, chat.user_id, 2)
    assert [(e.model, e.credits) for e in events] == [(DEMO_MODEL_NAME, 0)] * 2
    with app.extensions["database"].session() as session:
        assert credits_used(session, chat.user_id, month_of()) == 0
    page = chat.client.get("/admin/usage").get_data(as_text=True)
    row = re.search(rf'<tr id="usage-{chat.user_id}">(.*?)</tr>', page, re.S).group(1)
    cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td>(.*?)</td>", row)]
    assert cells[1:4] == ["0", "1 (1 left)", "2"]
    assert f"built-in demo model ({DEMO_MODEL_NAME}) and cost nothing" in page
    person = chat.client.get(f"/admin/users/{chat.user_id}/usage").get_data(as_text=True)
    assert f"Replies from the built-in demo model ({DEMO_MODEL_NAME}) cost nothing." in person
