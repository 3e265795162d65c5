"""Every route, enumerated from the URL map, answers someone else's id like a missing one
(404), and admin routes answer a non-admin with 403. A route with an id parameter this
test does not know fails it: new routes are covered by being added here."""

from __future__ import annotations

import pytest
from werkzeug.routing import AnyConverter

from app.accounts.models import ApiToken, User
from app.accounts.projects import add_member, create_project
from app.agents.models import Guideline
from app.chat.models import Conversation, QueuedMessage, Run
from app.chat.preset_models import Preset
from app.chat.schedule_models import ChatSchedule
from app.db import utcnow
from app.mcp.models import McpServer
from app.workspace.models import (
    Attachment,
    Campaign,
    Character,
    Offer,
    Output,
    Persona,
    VisualAsset,
)
from tests.web.helpers import snapshot

SKIPPED_ENDPOINTS = {"static", "sockets.chat_socket"}  # the socket has tests of its own


@pytest.fixture
def bobs_ids(app, auth):
    bob = auth.create("bob@example.com")
    with app.extensions["database"].session() as session:
        conversation = Conversation(user_id=bob, title="Bob's chat")
        offer = Offer(user_id=bob, name="Bob's offer")
        session.add_all([conversation, offer])
        session.flush()
        token, _ = ApiToken.issue(session.get(User, bob), "bob's token")
        rows = [
            Persona(user_id=bob, name="Bob's persona"),
            Output(user_id=bob, agent="quiz", title="Bob's quiz", content={}),
            VisualAsset(user_id=bob, title="Bob's image"),
            Run(conversation_id=conversation.id, user_id=bob, status="completed"),
            Guideline(position=99, text="Bob is not an admin", enabled=True),
            token,
            Character(user_id=bob, name="Bob's character"),
            Campaign(user_id=bob, name="Bob's campaign"),
            McpServer(owner_id=bob, name="bobs-tools", url="https://mcp.example.com/mcp"),
            Preset(user_id=bob, name="Bob's preset"),
            Attachment(
                user_id=bob,
                conversation_id=conversation.id,
                filename="bob.txt",
                content_type="text/plain",
                size=3,
                data=b"bob",
            ),
            QueuedMessage(conversation_id=conversation.id, content="Bob's next message"),
        ]
        rows.append(
            ChatSchedule(
                conversation_id=conversation.id,
                user_id=bob,
                cron="0 9 * * *",
                timezone="UTC",
                message="Bob's digest",
                next_run_at=utcnow(),
            )
        )
        session.add_all(rows)
        shared = create_project(session, bob, "Bob's team")
        invited = add_member(session, shared.id, bob, "carol@example.com", "editor")
        session.commit()
        return {
            "project_id": shared.id,
            # Carol's invitation: not Ada's to see or accept; and no live share link or
            # mailed link of anyone's (tests/web/test_share_links.py, test_email_links.py).
            "token": invited.token,
            "invitation_id": invited.invitation.id,  # Carol's: neither Ada's to revoke nor join
            "conversation_id": conversation.id,
            "offer_id": offer.id,
            "persona_id": rows[0].id,
            "output_id": rows[1].id,
            "asset_id": rows[2].id,
            "run_id": rows[3].id,
            "guideline_id": rows[4].id,
            "token_id": token.id,
            "attachment_id": rows[10].id,
            "preset_id": rows[9].id,
            "queued_id": rows[11].id,  # a message waiting in his chat's queue
            "name": "bobs-tools",  # an MCP server's name (his own)
            "tool_name": "get_current_time",
            "user_id": bob,
            "tool_use_id": "toolu_bobs_card",
            "sequence": 1,  # a row of his chat (rated through its feedback routes)
            "character_id": rows[6].id,
            "campaign_id": rows[7].id,
            "schedule_id": rows[10].id,
        }


def _url(rule, ids):
    values = {}
    for name in rule.arguments:
        converter = rule._converters[name]
        if isinstance(converter, AnyConverter):
            values[name] = next(iter(converter.items))
        else:
            assert name in ids, f"{rule.rule}: add '{name}' to this test's ids"
            values[name] = ids[name]
    return rule.build(values)[1]


def _routes(app):
    for rule in app.url_map.iter_rules():
        if rule.arguments and rule.endpoint not in SKIPPED_ENDPOINTS:
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                yield rule, method


def test_every_route_answers_foreign_ids_like_missing_ones(app, client, auth, bobs_ids):
    auth.create()
    auth.login()
    before = snapshot(app)
    checked = 0
    for rule, method in _routes(app):
        url = _url(rule, bobs_ids)
        if method == "GET":
            response = client.get(url)
        else:
            response = client.open(
                url, method=method, data={"csrf_token": auth.csrf}, headers=auth.headers()
            )
        expected = 403 if rule.rule.startswith(("/admin/", "/api/admin/")) else 404
        assert response.status_code == expected, f"{method} {url}: {response.status_code}"
        assert "Bob" not in response.get_data(as_text=True), f"{method} {url} leaked Bob's data"
        checked += 1
    assert checked >= 25
    assert snapshot(app) == before, "nothing of Bob's changed"
