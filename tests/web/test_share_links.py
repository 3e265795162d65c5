"""Share links (docs/CONTRACT.md, app/chat/shares.py): the owner's API and Share menu, the
read-only page `/s/<token>` that works logged out, and continuing from it in a chat of
one's own, which the model can go on with."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from app.chat.models import ChatShare, Conversation, Message
from app.chat.rows import insert_message, insert_tool_result
from app.chat.taint import typed_urls, untrusted_sources
from app.db import utcnow
from app.kinds import RowKind
from tests.factories import (
    PASSWORD,
    ChatDriver,
    add_conversation,
    add_token,
    csrf_token_from,
    user_id_of,
)
from tests.fake_model import Turn, text, tool_use
from tests.web.helpers import (
    bearer,
    count,
    database,
    fetch,
    json_error,
    redirect_path,
    sha256,
    snapshot,
)

LINK = re.compile(r"http://localhost/s/([A-Za-z0-9_-]{43})")


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


def _share(client, chat_id, body=None, headers=None):
    response = client.post(f"/api/chats/{chat_id}/share", json=body or {}, headers=headers)
    assert response.status_code == 201, response.get_data(as_text=True)
    return response.get_json()


def _token(url: str) -> str:
    match = LINK.fullmatch(url)
    assert match, url
    return match.group(1)


def _branched_chat(app, user_id: int) -> int:
    """Ada's chat, written row by row: a message with a file, an answer replaced by a
    regenerated one (the old one on a branch not shown), a held fetch's card with its
    arguments, a hidden result that read a web page, and an answer with a badge."""
    chat_id = add_conversation(app, user_id, "Launch plan")
    with database(app).session() as session:
        user_meta = {
            "blocks": [{"type": "text", "text": "Plan the launch"}],
            "files": [{"id": 1, "filename": "private-notes.pdf", "size": 10}],
        }
        insert_message(
            session,
            chat_id,
            role="user",
            kind=RowKind.USER,
            content="Plan the launch",
            meta=user_meta,
        )
        insert_message(
            session,
            chat_id,
            role="assistant",
            kind=RowKind.HOST,
            content="Old answer",
            meta={"blocks": [{"type": "text", "text": "Old answer"}]},
        )
        conversation = session.get(Conversation, chat_id)
        conversation.branch_leaf_sequence, conversation.branch_chosen_at_sequence = 1, 2
        card = {
            "kind": "confirmation",
            "tool": "fetch_url",
            "toolUseId": "toolu_fetch",
            "title": "Read this web page?",
            "arguments": {"url": "https://example.com/?key=SECRET-ARGUMENT"},
            "reason": "Held.",
            "status": "answered",
            "answer": {"approved": True},
        }
        blocks = [
            {"type": "text", "text": "Let me **read** it. <script>alert(1)</script>"},
            {"type": "tool_use", "id": "toolu_fetch", "name": "fetch_url", "input": {}},
        ]
        insert_message(
            session,
            chat_id,
            role="assistant",
            kind=RowKind.CARD,
            content="Let me **read** it. <script>alert(1)</script>",
            meta={"blocks": blocks, "card": card, "awaiting": None},
        )
        insert_tool_result(
            session,
            chat_id,
            "toolu_fetch",
            "fetch_url",
            "SECRET-PAGE-TEXT",
            untrusted=[{"tool": "fetch_url", "url": "https://example.com/"}],
        )
        insert_message(
            session,
            chat_id,
            role="assistant",
            kind=RowKind.HOST,
            content="New answer",
            meta={"blocks": [{"type": "text", "text": "New answer"}]},
        )
        session.commit()
    return chat_id


# -- the owner's API ------------------------------------------------------------------------


def test_an_owner_makes_reads_replaces_and_revokes_a_link(app, user):
    chat_id = _branched_chat(app, user)
    _, raw = add_token(app, user, scopes=("read", "chat"))
    script = app.test_client()
    script.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {raw}"
    visitor = app.test_client()

    assert script.get(f"/api/chats/{chat_id}/share").get_json() == {
        "shared": False,
        "created_at": None,
        "expires_at": None,
    }
    made = _share(script, chat_id)
    assert made["expires_at"] is None
    token = _token(made["url"])
    # Only the digest is kept; the state never says the token again.
    with database(app).session() as session:
        share = session.scalars(select(ChatShare)).one()
        assert share.token_digest == sha256(token)
        assert (share.conversation_id, share.created_by) == (chat_id, user)
    state = script.get(f"/api/chats/{chat_id}/share")
    assert state.get_json()["shared"] is True and state.get_json()["expires_at"] is None
    assert token not in state.get_data(as_text=True)

    page = visitor.get(f"/s/{token}")
    assert page.status_code == 200
    assert page.headers["Referrer-Policy"] == "no-referrer"
    assert "noindex" in page.headers["X-Robots-Tag"]
    assert "New answer" in page.get_data(as_text=True)

    # A new link replaces the old one, which stops working at once.
    again = _share(
        script, chat_id, {"expires_days": 7.0}
    )  # a whole number, as JSON Schema reads it
    new_token = _token(again["url"])
    assert visitor.get(f"/s/{token}").status_code == 404
    assert visitor.get(f"/s/{new_token}").status_code == 200
    expires = script.get(f"/api/chats/{chat_id}/share").get_json()["expires_at"]
    assert expires == again["expires_at"] and expires.startswith(
        (utcnow() + timedelta(days=7)).date().isoformat()
    )

    assert script.delete(f"/api/chats/{chat_id}/share").status_code == 204
    gone = visitor.get(f"/s/{new_token}")
    unknown = visitor.get("/s/" + "A" * 43)
    assert gone.status_code == unknown.status_code == 404
    # The same page, but for the form token every page carries (signed with the second it
    # was made in: two answers a second apart differ there, and say nothing of the link).
    assert _without_csrf_token(gone) == _without_csrf_token(unknown)
    assert gone.headers["Referrer-Policy"] == "no-referrer"
    assert script.get(f"/api/chats/{chat_id}/share").get_json()["shared"] is False

    # Deleting the chat takes its links with it.
    newest = _token(_share(script, chat_id)["url"])
    script.post(f"/chats/{chat_id}/delete")
    assert visitor.get(f"/s/{newest}").status_code == 404
    assert count(app, ChatShare) == 0


def test_an_expiry_out_of_range_is_400_and_makes_no_link(app, chat):
    chat_id = chat.new_chat("Mine")
    for days in (0, 366, -1, "7", 1.5, True):
        response = chat.post(f"/api/chats/{chat_id}/share", {"expires_days": days})
        assert json_error(response, 400) == "INVALID_FIELD", days
        assert response.get_json()["error"]["field"] == "expires_days"
    assert count(app, ChatShare) == 0


def test_another_persons_chat_and_a_read_only_token_make_no_link(app, chat, auth):
    bob = auth.create("bob@example.com")
    bobs_chat = add_conversation(app, bob, "Bob's")
    before = snapshot(app)
    for response in (
        chat.post(f"/api/chats/{bobs_chat}/share", {}),
        chat.client.get(f"/api/chats/{bobs_chat}/share"),
        chat.client.delete(f"/api/chats/{bobs_chat}/share", headers=chat.auth.headers()),
        chat.post("/api/chats/999999/share", {}),
    ):
        assert json_error(response, 404) == "NOT_FOUND"
    _, read_only = add_token(app, chat.user_id, scopes=("read",))
    refused = app.test_client().post(
        f"/api/chats/{chat.new_chat()}/share", json={}, headers=bearer(read_only)
    )
    assert json_error(refused, 403) == "INSUFFICIENT_SCOPE"
    # Without the CSRF header, a browser session makes nothing either.
    assert chat.client.post(f"/api/chats/{bobs_chat}/share", json={}).status_code == 400
    after = snapshot(app)
    assert after["chat_shares"] == before["chat_shares"] == []


def test_an_expired_link_answers_404(app, chat):
    chat_id = chat.new_chat("Mine")
    token = _token(_share(chat.client, chat_id, {"expires_days": 1}, chat.auth.headers())["url"])
    visitor = app.test_client()
    assert visitor.get(f"/s/{token}").status_code == 200
    with database(app).session() as session:
        session.execute(update(ChatShare).values(expires_at=utcnow() - timedelta(seconds=1)))
        session.commit()
    assert visitor.get(f"/s/{token}").status_code == 404
    assert chat.client.get(f"/api/chats/{chat_id}/share").get_json()["shared"] is False


# -- the shared page ------------------------------------------------------------------------


def test_the_shared_page_shows_the_shown_branchs_visible_rows_only(app, chat):
    chat_id = _branched_chat(app, chat.user_id)
    token = _token(_share(chat.client, chat_id, headers=chat.auth.headers())["url"])
    page = app.test_client().get(f"/s/{token}")  # logged out
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert "Plan the launch" in html and "New answer" in html
    assert "Old answer" not in html  # another branch
    assert "SECRET-PAGE-TEXT" not in html  # a hidden tool result
    assert "SECRET-ARGUMENT" not in html and "Held." not in html  # a held call's internals
    assert "Read this web page?" in html and "Allowed" in html  # the card's question, answered
    assert "private-notes.pdf" not in html  # files are not shared
    assert "<strong>read</strong>" in html and "<script>alert" not in html  # sanitized Markdown
    assert 'id="m-3-untrusted"' not in html  # (the card read nothing itself)
    # No composer, no socket, no controls; a logged-out reader is offered the login.
    for absent in ('id="composer"', "ws-connect", "Regenerate", "row-edit", "Continue from here"):
        assert absent not in html
    assert f"/login?next=/s/{token}" in html.replace("%2F", "/")


def test_provenance_badges_show_on_the_shared_page(app, chat):
    chat_id = add_conversation(app, chat.user_id, "Read a page")
    with database(app).session() as session:
        insert_message(
            session,
            chat_id,
            role="user",
            kind=RowKind.USER,
            content="From my site",
            meta={
                "blocks": [{"type": "text", "text": "From my site"}],
                "untrusted": [{"tool": "onboarding_fetch", "url": "https://calm.example/"}],
            },
        )
        session.commit()
    token = _token(_share(chat.client, chat_id, headers=chat.auth.headers())["url"])
    html = app.test_client().get(f"/s/{token}").get_data(as_text=True)
    assert 'id="m-1-untrusted"' in html and "https://calm.example/" in html


# -- the Share menu on the chat page --------------------------------------------------------


def test_the_share_menu_shows_the_link_once_states_expiry_and_revokes(app, chat):
    chat_id = chat.new_chat("Mine")
    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert 'id="share-menu"' in page and "Not shared" in page
    htmx = {**chat.auth.headers(), "HX-Request": "true"}

    refused = chat.client.post(f"/chats/{chat_id}/share", data={"expires": "400"}, headers=htmx)
    assert refused.status_code == 400 and count(app, ChatShare) == 0
    no_csrf = chat.client.post(f"/chats/{chat_id}/share", data={}, headers={"HX-Request": "true"})
    assert no_csrf.status_code == 400 and count(app, ChatShare) == 0

    made = chat.client.post(f"/chats/{chat_id}/share", data={"expires": "7"}, headers=htmx)
    panel = made.get_data(as_text=True)
    assert made.status_code == 201 and panel.startswith('<div id="share-panel"')
    token = LINK.search(panel).group(1)
    assert 'data-copy-of="share-link"' in panel and "expires on" in panel
    again = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert token not in again and "expires on" in again  # shown once; its expiry stays

    revoked = chat.client.post(f"/chats/{chat_id}/share/revoke", headers=htmx)
    assert revoked.status_code == 200 and "Not shared" in revoked.get_data(as_text=True)
    assert app.test_client().get(f"/s/{token}").status_code == 404

    # Without script, the new link comes on a page of its own, never expiring.
    plain = chat.client.post(
        f"/chats/{chat_id}/share", data={"expires": ""}, headers=chat.auth.headers()
    )
    shown = plain.get_data(as_text=True)
    assert plain.status_code == 201 and LINK.search(shown) and "never expires" in shown


# -- continuing in a chat of one's own ------------------------------------------------------


def _ada_chat_with_a_tool_call(chat, fake_model) -> int:
    """Ada's chat through real runs: a tool call with its result, then a second answer."""
    chat_id = chat.new_chat("Offers talk")
    fake_model.script(
        Turn(text("Let me look."), tool_use("list_offers", {}, id="toolu_list")),
        Turn(text("You have no offers yet.")),
    )
    assert (
        chat.wait(chat.send(chat_id, "What are my offers? https://typed.example/"))["status"]
        == "completed"
    )
    fake_model.script(Turn(text("Anything else?")))
    assert chat.wait(chat.send(chat_id, "Thanks"))["status"] == "completed"
    with database(chat.app).session() as session:
        # A result that had read a web page: the copy must stay tainted by it.
        insert_tool_result(
            session,
            chat_id,
            "toolu_x",
            "fetch_url",
            "page",
            untrusted=[{"tool": "fetch_url", "url": "https://read.example/"}],
        )
        session.commit()
    return chat_id


def _bob(app, auth) -> ChatDriver:
    auth.create("bob@example.com")
    client = app.test_client()
    driver = ChatDriver(app, client, type(auth)(app, client))
    driver.auth.login("bob@example.com")
    return driver


def _continue(driver, token, sequence=None):
    csrf = csrf_token_from(driver.client.get(f"/s/{token}").get_data(as_text=True))
    data = {"csrf_token": csrf, **({"sequence": str(sequence)} if sequence else {})}
    return driver.client.post(f"/s/{token}/continue", data=data)


def _all_rows(app, chat_id):
    with database(app).session() as session:
        rows = session.scalars(
            select(Message).where(Message.conversation_id == chat_id).order_by(Message.sequence)
        )
        return [(row.kind, row.content, row.hidden) for row in rows]


def test_continuing_copies_the_branch_into_a_chat_the_model_can_go_on_with(
    app, chat, auth, fake_model
):
    chat_id = _ada_chat_with_a_tool_call(chat, fake_model)
    token = _token(_share(chat.client, chat_id, headers=chat.auth.headers())["url"])
    shown = chat.rows(chat_id)
    look = next(row for row in shown if row["content"] == "Let me look.")
    original = _original(app, chat_id)
    bob = _bob(app, auth)

    # The page offers to continue from the end of each answer but the last (the button
    # at the top continues from there).
    page = bob.client.get(f"/s/{token}").get_data(as_text=True)
    first_end = next(row for row in shown if row["content"] == "You have no offers yet.")
    offered = re.findall(r'name="sequence" value="(\d+)"', page)
    assert offered == [str(first_end["sequence"])] and "Continue from here" in page

    # From the row whose tool call is answered by the hidden row after it.
    response = _continue(bob, token, look["sequence"])
    copied_id = int(redirect_path(response).rsplit("/", 1)[1])
    assert response.status_code == 303
    copy = _all_rows(app, copied_id)
    assert copy == [
        ("user", "What are my offers? https://typed.example/", False),
        ("host", "Let me look.", False),
        ("tool_result", "", True),
    ]
    rows = bob.rows(copied_id)
    # Bob did not type these words: the copy is tainted, and says where they came from.
    assert rows[0]["untrusted_sources"] == [{"shared_chat": "Offers talk"}]
    assert 'id="m-1-untrusted"' in bob.client.get(f"/chats/{copied_id}").get_data(as_text=True)

    fake_model.script(Turn(text("Going on.")))
    assert bob.wait(bob.send(copied_id, "Go on"))["status"] == "completed"
    assert fake_model.rejections == []
    sent = fake_model.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"][-1]["id"] == sent[2]["content"][0]["tool_use_id"] == "toolu_list"
    assert bob.rows(copied_id)[-1]["content"] == "Going on."

    # The whole branch by default; the untrusted result comes along.
    whole = int(redirect_path(_continue(bob, token)).rsplit("/", 1)[1])
    assert [row[1] for row in _all_rows(app, whole) if not row[2]] == [
        row["content"] for row in shown
    ]
    tools = app.extensions["services"].tools
    with database(app).session() as session:
        # What the taint gate reads: the original's outside content, and the shared words.
        sources = untrusted_sources(session, whole, tools, None)
        assert len(sources) == 2 and {"shared_chat": "Offers talk"} in sources
        assert {"tool": "fetch_url", "url": "https://read.example/"} in sources
        assert typed_urls(session, whole) == set()  # Bob typed no address there
        assert typed_urls(session, chat_id) == {"https://typed.example/"}

    # The original is untouched.
    assert _original(app, chat_id) == original


def _original(app, chat_id):
    """The chat's row and all its rows, every column."""
    with database(app).session() as session:
        conversation = session.get(Conversation, chat_id)
        rows = session.scalars(
            select(Message).where(Message.conversation_id == chat_id).order_by(Message.sequence)
        )
        return (
            (conversation.title, conversation.updated_at, conversation.branch_leaf_sequence),
            [(r.id, r.sequence, r.parent_sequence, r.kind, r.content, r.meta) for r in rows],
        )


def test_continuing_refused_leaves_nothing_behind(app, chat, auth, fake_model):
    chat_id = chat.new_chat("Mine")
    fake_model.script(Turn(text("Hello.")))
    chat.wait(chat.send(chat_id, "Hi"))
    token = _token(_share(chat.client, chat_id, headers=chat.auth.headers())["url"])
    bob = _bob(app, auth)
    csrf = csrf_token_from(bob.client.get(f"/s/{token}").get_data(as_text=True))
    before = snapshot(app)

    # A row that is not shown on the branch, and a post without its CSRF token.
    missing = {"csrf_token": csrf, "sequence": "99"}
    assert bob.client.post(f"/s/{token}/continue", data=missing).status_code == 404
    assert bob.client.post(f"/s/{token}/continue", data={}).status_code == 400
    assert snapshot(app) == before
    # A revoked link.
    chat.client.delete(f"/api/chats/{chat_id}/share", headers=chat.auth.headers())
    revoked = snapshot(app)
    assert bob.client.post(f"/s/{token}/continue", data={"csrf_token": csrf}).status_code == 404
    assert snapshot(app) == revoked


def test_a_logged_out_reader_logs_in_and_comes_back(app, chat, auth):
    chat_id = chat.new_chat("Mine")
    token = _token(_share(chat.client, chat_id, headers=chat.auth.headers())["url"])
    auth.create("bob@example.com")
    visitor = app.test_client()
    csrf = csrf_token_from(visitor.get(f"/s/{token}").get_data(as_text=True))
    response = visitor.post(f"/s/{token}/continue", data={"csrf_token": csrf})
    assert redirect_path(response) == "/login"
    assert f"next=/s/{token}" in response.headers["Location"].replace("%2F", "/")
    login_csrf = csrf_token_from(visitor.get(response.headers["Location"]).get_data(as_text=True))
    logged_in = visitor.post(
        response.headers["Location"],
        data={"email": "bob@example.com", "password": PASSWORD, "csrf_token": login_csrf},
    )
    assert redirect_path(logged_in) == f"/s/{token}"
    page = visitor.get(f"/s/{token}").get_data(as_text=True)
    assert "Continue in a chat of my own" in page

    # A script continues with a bearer token of the `chat` scope (a `read` one may not).
    bob = user_id_of(app, "bob@example.com")
    _, reader = add_token(app, bob, scopes=("read",))
    script = app.test_client()
    refused = script.post(f"/s/{token}/continue", headers=bearer(reader))
    assert json_error(refused, 403) == "INSUFFICIENT_SCOPE"
    _, writer = add_token(app, bob, scopes=("chat",))
    continued = script.post(f"/s/{token}/continue", headers=bearer(writer))
    assert continued.status_code == 303
    copied = int(redirect_path(continued).rsplit("/", 1)[1])
    assert fetch(app, Conversation, copied).user_id == bob


def test_continuing_over_https_needs_the_csrf_token_but_no_referer(app, chat, auth):
    chat_id = chat.new_chat("Mine")
    token = _token(_share(chat.client, chat_id, headers=chat.auth.headers())["url"])
    auth.create("bob@example.com")
    bob = app.test_client()
    https = {"base_url": "https://localhost"}
    login_csrf = csrf_token_from(bob.get("/login", **https).get_data(as_text=True))
    logged_in = bob.post(
        "/login",
        data={"email": "bob@example.com", "password": PASSWORD, "csrf_token": login_csrf},
        headers={"Referer": "https://localhost/login"},
        **https,
    )
    assert logged_in.status_code == 302
    page = bob.get(f"/s/{token}", **https)
    assert page.headers["Referrer-Policy"] == "no-referrer"  # so the post below has none
    csrf = csrf_token_from(page.get_data(as_text=True))
    assert bob.post(f"/s/{token}/continue", data={}, **https).status_code == 400
    continued = bob.post(f"/s/{token}/continue", data={"csrf_token": csrf}, **https)
    assert continued.status_code == 303 and redirect_path(continued).startswith("/chats/")


def test_request_logs_never_hold_the_token(app, caplog):
    token = "T" * 43
    with caplog.at_level(logging.INFO):
        logging.getLogger("werkzeug").info(
            '%s - - [%s] "%s" %s %s', "127.0.0.1", "now", f"GET /s/{token} HTTP/1.1", "200", "-"
        )
        logging.getLogger("gunicorn.access").info(
            "%(r)s %(f)s",
            {"r": f"POST /s/{token}/continue HTTP/1.1", "f": f"http://x/login?next=%2Fs%2F{token}"},
        )
        app.logger.error(f"Exception on /s/{token} [GET]")
    logged = caplog.text
    assert token not in logged and logged.count("[redacted]") == 4


def _without_csrf_token(response) -> str:
    html = response.get_data(as_text=True)
    return html.replace(csrf_token_from(html), "")
