"""A socket ends with its way in (app/web/socket_access.py): logout, a new password (set
in settings or by a reset link), "log out everywhere", a token's revocation or expiry and the person's deletion close the
sockets they opened with 1008, in every process; each catch-up reads the way in again."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
import simple_websocket

from app.accounts.models import User, end_sessions
from app.db import utcnow
from tests.factories import (
    PASSWORD,
    REDIS_URL,
    AuthActions,
    add_conversation,
    add_token,
    csrf_token_from,
    needs_redis,
)
from tests.live import LiveServer, connect_socket
from tests.waiting import scaled

HTMX = {"HX-Request": "true"}


@pytest.fixture
def server(app):
    live = LiveServer(app).start()
    yield live
    live.stop()


@pytest.fixture
def ada(app, auth):
    """Ada, logged in on the test client, with a chat and a token."""
    user_id = auth.create()
    auth.login()
    token_id, raw = add_token(app, user_id)
    return {
        "id": user_id,
        "chat": add_conversation(app, user_id),
        "token_id": token_id,
        "token": raw,
    }


def _connect(server, chat_id, *, token=None, cookie=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {"Cookie": f"session={cookie}"}
    return connect_socket(f"{server.ws_url}/ws/chats/{chat_id}?format=json", headers=headers)


def _serving(ws) -> list[dict]:
    """A catch-up answered: the socket is subscribed and serving."""
    ws.send(json.dumps({"after": 0}))
    frames = []
    while not frames or frames[-1]["type"] not in ("conversation", "error"):
        frames.append(json.loads(ws.receive(timeout=10)))
    return frames


def _closed(ws) -> simple_websocket.ConnectionClosed:
    """The server's close, waited for (bounded); frames before it are skipped."""
    deadline = time.monotonic() + scaled(10)
    with pytest.raises(simple_websocket.ConnectionClosed) as closed:
        while time.monotonic() < deadline:
            ws.receive(timeout=0.5)
    return closed.value


def _cookie(client) -> str:
    return client.get_cookie("session").value


def _end_by_logout(client, auth):
    return auth.logout()


def _end_by_new_password(client, auth):
    new = "a brand new passphrase"
    return client.post(
        "/settings/password",
        data={"current_password": PASSWORD, "new_password": new, "confirm": new},
        headers={**HTMX, **auth.headers()},
    )


def _end_everywhere(client, auth):
    return client.post("/settings/sessions/end", data={"csrf_token": auth.csrf})


def _end_by_reset_link(client, auth):
    """A mailed reset link, followed in another browser."""
    from sqlalchemy import select

    from app.accounts.email_tokens import RESET, issue_email_token

    with auth.app.extensions["database"].session() as session:
        user = session.scalar(select(User).where(User.email == "ada@example.com"))
        raw = issue_email_token(session, user, RESET)
        session.commit()
    elsewhere = auth.app.test_client()
    page = elsewhere.get(f"/reset/{raw}").get_data(as_text=True)
    new = "a brand new passphrase"
    data = {"new_password": new, "confirm": new, "csrf_token": csrf_token_from(page)}
    return elsewhere.post(f"/reset/{raw}", data=data)


@pytest.mark.parametrize(
    "end", [_end_by_logout, _end_by_new_password, _end_everywhere, _end_by_reset_link]
)
def test_ending_the_session_closes_its_open_sockets_but_not_the_tokens(
    server, client, auth, ada, end
):
    by_cookie = _connect(server, ada["chat"], cookie=_cookie(client))
    by_token = _connect(server, ada["chat"], token=ada["token"])
    try:
        _serving(by_cookie)
        _serving(by_token)
        assert end(client, auth).status_code in (200, 302)
        closed = _closed(by_cookie)
        assert closed.reason == 1008 and "session ended" in closed.message
        assert _serving(by_token)[-1]["type"] == "conversation"  # a token is not a session
    finally:
        by_token.close()


def test_revoking_a_token_closes_its_sockets_and_no_other(app, server, client, auth, ada):
    other_id, other = add_token(app, ada["id"], name="other")
    revoked = _connect(server, ada["chat"], token=ada["token"])
    kept = [
        _connect(server, ada["chat"], token=other),
        _connect(server, ada["chat"], cookie=_cookie(client)),
    ]
    try:
        for ws in (revoked, *kept):
            _serving(ws)
        response = client.post(f"/settings/tokens/{ada['token_id']}/revoke", headers=auth.headers())
        assert response.status_code == 200
        closed = _closed(revoked)
        assert closed.reason == 1008 and "token ended" in closed.message
        for ws in kept:
            assert _serving(ws)[-1]["type"] == "conversation"
    finally:
        for ws in kept:
            ws.close()


def test_deleting_a_person_closes_their_sockets(app, server, client, auth):
    bob_id = auth.create("bob@example.com")
    _, raw = add_token(app, bob_id)
    ws = _connect(server, add_conversation(app, bob_id), token=raw)
    _serving(ws)
    auth.create("admin@example.com", admin=True)
    auth.login("admin@example.com")
    response = client.post(
        f"/admin/users/{bob_id}/delete",
        data={"email": "bob@example.com", "csrf_token": auth.csrf},
    )
    assert response.status_code == 302
    assert _closed(ws).reason == 1008


def test_a_socket_closes_when_its_token_expires(app, server, ada):
    _, raw = add_token(app, ada["id"], expires_at=utcnow() + timedelta(seconds=3))
    ws = _connect(server, ada["chat"], token=raw)
    _serving(ws)
    closed = _closed(ws)
    assert closed.reason == 1008 and "token ended" in closed.message


def test_a_catch_up_reads_the_session_again(app, server, client, ada):
    """Ended without the event reaching the socket (say Redis was down): the next
    catch-up finds out, sends no rows and closes."""
    ws = _connect(server, ada["chat"], cookie=_cookie(client))
    _serving(ws)
    with app.extensions["database"].session() as session:
        end_sessions(session.get(User, ada["id"]))
        session.commit()
    ws.send(json.dumps({"after": 0}))
    with pytest.raises(simple_websocket.ConnectionClosed) as closed:
        ws.receive(timeout=10)  # the close comes first: no rows
    assert closed.value.reason == 1008


@needs_redis
def test_a_session_ended_in_another_process_closes_the_socket(make_app, app, server, ada):
    """The socket is served by one process; the logout happens in another (over Redis)."""
    elsewhere = make_app(create_schema=False, redis_url=REDIS_URL)
    assert app.extensions["services"].settings.redis_url  # both on Redis
    browser = elsewhere.test_client()
    other_auth = AuthActions(elsewhere, browser)
    other_auth.login()
    ws = _connect(server, ada["chat"], cookie=_cookie(browser))
    _serving(ws)
    assert other_auth.logout().status_code == 302
    assert _closed(ws).reason == 1008


def test_removing_a_member_closes_their_sockets_on_the_projects_chats_only(
    app, server, client, auth, ada
):
    from app.accounts.projects import add_member, create_project
    from app.chat.conversations import create_conversation

    owner = auth.create("owner@example.com")
    with app.extensions["database"].session() as session:
        project = create_project(session, owner, "Team")
        add_member(session, project.id, owner, "ada@example.com", "editor")
        team_chat = create_conversation(session, ada["id"], project_id=project.id).id
        session.commit()
    on_team = _connect(server, team_chat, token=ada["token"])
    on_personal = _connect(server, ada["chat"], token=ada["token"])
    try:
        _serving(on_team)
        _serving(on_personal)
        owner_token = add_token(app, owner)[1]
        removed = client.delete(
            f"/api/projects/{project.id}/members/{ada['id']}",
            headers={"Authorization": f"Bearer {owner_token}"},
        )
        assert removed.status_code == 204
        closed = _closed(on_team)
        assert closed.reason == 1008 and "no longer a member" in closed.message
        assert _serving(on_personal)[-1]["type"] == "conversation"
        again = _connect(server, team_chat, token=ada["token"])
        assert _closed(again).reason == 1008  # refused from now on
    finally:
        on_personal.close()


def test_an_admin_removing_a_project_closes_its_members_sockets_on_its_chats(
    app, server, client, auth, ada
):
    from app.accounts.projects import create_project
    from app.chat.conversations import create_conversation

    auth.create("root@example.com", admin=True)
    with app.extensions["database"].session() as session:
        project = create_project(session, ada["id"], "Team")
        team_chat = create_conversation(session, ada["id"], project_id=project.id).id
        session.commit()
    on_team = _connect(server, team_chat, token=ada["token"])
    on_personal = _connect(server, ada["chat"], token=ada["token"])
    try:
        _serving(on_team)
        _serving(on_personal)
        auth.login("root@example.com")
        removed = client.post(
            f"/admin/projects/{project.id}/delete", data={"name": "Team", "csrf_token": auth.csrf}
        )
        assert removed.status_code == 302
        assert _closed(on_team).reason == 1008
        assert _serving(on_personal)[-1]["type"] == "conversation"
    finally:
        on_personal.close()


def test_deleting_a_projects_only_owner_closes_their_sockets_not_the_heirs(
    app, server, client, auth, ada
):
    from app.accounts.projects import add_member, create_project
    from app.chat.conversations import create_conversation

    bob = auth.create("bob@example.com")
    with app.extensions["database"].session() as session:
        project = create_project(session, bob, "Team")
        add_member(session, project.id, bob, "ada@example.com", "editor")
        bobs_chat = create_conversation(session, bob, project_id=project.id).id
        adas_chat = create_conversation(session, ada["id"], project_id=project.id).id
        session.commit()
    bobs = _connect(server, bobs_chat, token=add_token(app, bob)[1])
    adas = _connect(server, adas_chat, token=ada["token"])
    try:
        _serving(bobs)
        _serving(adas)
        admin = AuthActions(app, app.test_client())
        admin.create("root@example.com", admin=True)
        admin.login("root@example.com")
        response = admin.client.post(
            f"/admin/users/{bob}/delete",
            data={"email": "bob@example.com", "csrf_token": admin.csrf},
        )
        assert response.status_code == 302
        assert _closed(bobs).reason == 1008
        assert _serving(adas)[-1]["type"] == "conversation"  # the project is hers now
    finally:
        adas.close()
