"""The Projects page in Settings (app/web/projects_settings.py), as a person uses it with
plain forms: an owner makes a project, invites, changes roles, removes, revokes, renames
and deletes; other members read and leave; invitations to one's own address."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.accounts.models import User
from app.accounts.project_models import Project, ProjectInvitation, ProjectMember
from app.accounts.service import create_user
from app.db import utcnow
from tests.factories import PASSWORD, AuthActions, csrf_token_from
from tests.web.helpers import count, redirect_path, snapshot


def _person(app, email: str, verified: bool = True) -> tuple:
    """(their client, their CSRF token, their id), logged in."""
    with app.extensions["database"].session() as session:
        user = create_user(session, email, PASSWORD, verified=verified)
        session.commit()
        user_id = user.id
    client = app.test_client()
    auth = AuthActions(app, client)
    auth.login(email)
    return client, auth.csrf, user_id


def _post(client, csrf, url, **data):
    return client.post(url, data={"csrf_token": csrf, **data})


def _make_project(client, csrf, name="Launch team") -> int:
    made = _post(client, csrf, "/settings/projects", name=name)
    assert made.status_code == 303, made.get_data(as_text=True)
    return int(redirect_path(made).rsplit("/", 1)[1])


def _role_selected(page: str, user_id: int) -> str:
    select_html = re.search(rf'<select id="role-{user_id}".*?</select>', page, re.S)
    assert select_html, f"no role choice for {user_id}"
    return re.search(r'<option value="(\w+)" selected>', select_html.group(0)).group(1)


def test_an_owner_makes_invites_changes_roles_removes_and_deletes(app):
    ada, csrf, ada_id = _person(app, "ada@example.com")
    _bob, _, bob_id = _person(app, "bob@example.com")
    assert 'href="/settings/projects"' in ada.get("/settings").get_data(as_text=True)
    listing = ada.get("/settings/projects").get_data(as_text=True)
    assert "Personal</a>" in listing and ">owner</span>" in listing

    assert ada.post("/settings/projects", data={"name": "No token"}).status_code == 400
    empty = _post(ada, csrf, "/settings/projects", name="   ")
    assert empty.status_code == 400 and "Name the project." in empty.get_data(as_text=True)
    pid = _make_project(ada, csrf)
    page = ada.get(f"/settings/projects/{pid}").get_data(as_text=True)
    assert "<h1>Launch team</h1>" in page and "Launch team is made" in page
    assert _role_selected(page, ada_id) == "owner"

    # An account joins at once; again is refused with the reason, nothing written.
    added = _post(ada, csrf, f"/settings/projects/{pid}/members", email="BOB@example.com")
    assert added.status_code == 201
    assert "bob@example.com is a member now, as editor." in added.get_data(as_text=True)
    before = snapshot(app)
    again = _post(ada, csrf, f"/settings/projects/{pid}/members", email="bob@example.com")
    assert again.status_code == 409
    assert "That person is a member already." in again.get_data(as_text=True)
    bad = _post(ada, csrf, f"/settings/projects/{pid}/members", email="not an address")
    assert bad.status_code == 400 and "That is not an email address." in bad.get_data(as_text=True)
    role = _post(
        ada, csrf, f"/settings/projects/{pid}/members", email="x@example.com", role="admin"
    )
    assert role.status_code == 400 and "Choose a role" in role.get_data(as_text=True)
    assert snapshot(app) == before

    # An address without an account: without mail, the link to copy, and Revoke.
    invited = _post(
        ada, csrf, f"/settings/projects/{pid}/members", email="carol@example.com", role="viewer"
    )
    text = invited.get_data(as_text=True)
    assert invited.status_code == 201 and "Mail is off here: send them the link." in text
    link = re.search(r'<code class="secret" id="invitation-link">([^<]+)</code>', text).group(1)
    assert 'data-copy-of="invitation-link"' in text
    assert "carol@example.com <span" in text and "Revoke" in text

    # Roles: changed from the select; the last owner stays one.
    changed = _post(ada, csrf, f"/settings/projects/{pid}/members/{bob_id}/role", role="owner")
    assert redirect_path(changed) == f"/settings/projects/{pid}"
    page = ada.get(f"/settings/projects/{pid}").get_data(as_text=True)
    assert _role_selected(page, bob_id) == "owner" and "bob@example.com is owner now." in page
    _post(ada, csrf, f"/settings/projects/{pid}/members/{bob_id}/role", role="viewer")
    before = snapshot(app)
    last = _post(ada, csrf, f"/settings/projects/{pid}/members/{ada_id}/role", role="editor")
    assert last.status_code == 409
    assert "A project keeps at least one owner" in last.get_data(as_text=True)
    leave = _post(ada, csrf, f"/settings/projects/{pid}/members/{ada_id}/remove")
    assert leave.status_code == 409
    assert snapshot(app) == before

    # Revoked, the link no longer works for its address.
    [invitation_id] = re.findall(
        r'id="invitation-(\d+)"', ada.get(f"/settings/projects/{pid}").text
    )
    revoked = _post(ada, csrf, f"/settings/projects/{pid}/invitations/{invitation_id}/revoke")
    assert redirect_path(revoked) == f"/settings/projects/{pid}"
    carol, _, _ = _person(app, "carol@example.com")
    assert carol.get(link.replace("http://localhost", "")).status_code == 404

    removed = _post(ada, csrf, f"/settings/projects/{pid}/members/{bob_id}/remove")
    assert redirect_path(removed) == f"/settings/projects/{pid}"
    assert "bob@example.com is no longer a member." in ada.get(f"/settings/projects/{pid}").text
    assert count(app, ProjectMember, ProjectMember.project_id == pid) == 1

    renamed = _post(ada, csrf, f"/settings/projects/{pid}/rename", name=" Spring launch ")
    assert redirect_path(renamed) == f"/settings/projects/{pid}"
    assert "<h1>Spring launch</h1>" in ada.get(f"/settings/projects/{pid}").text
    deleted = _post(ada, csrf, f"/settings/projects/{pid}/delete")
    assert redirect_path(deleted) == "/settings/projects"
    listing = ada.get("/settings/projects").get_data(as_text=True)
    assert "Spring launch is deleted" in listing
    assert count(app, Project, Project.id == pid) == 0


def test_the_personal_project_is_neither_shared_left_nor_deleted(app):
    ada, csrf, ada_id = _person(app, "ada@example.com")
    with app.extensions["database"].session() as session:
        personal = session.scalar(select(Project.id).where(Project.personal_user_id == ada_id))
    page = ada.get(f"/settings/projects/{personal}").get_data(as_text=True)
    assert "<h1>Personal</h1>" in page and "cannot be shared, left or deleted" in page
    assert "Delete" not in page and "Leave" not in page and "Invite" not in page
    before = snapshot(app)
    assert _post(ada, csrf, f"/settings/projects/{personal}/delete").status_code == 409
    assert (
        _post(ada, csrf, f"/settings/projects/{personal}/members/{ada_id}/remove").status_code
        == 409
    )
    shared = _post(ada, csrf, f"/settings/projects/{personal}/members", email="b@example.com")
    assert shared.status_code == 409 and "make a project to share" in shared.text
    assert snapshot(app) == before


def test_members_who_are_not_owners_read_the_members_and_may_leave(app):
    ada, csrf, _ = _person(app, "ada@example.com")
    bob, bob_csrf, bob_id = _person(app, "bob@example.com")
    eve, eve_csrf, _ = _person(app, "eve@example.com")
    pid = _make_project(ada, csrf)
    _post(ada, csrf, f"/settings/projects/{pid}/members", email="bob@example.com", role="viewer")
    _post(ada, csrf, f"/settings/projects/{pid}/members", email="zed@example.com")

    page = bob.get(f"/settings/projects/{pid}").get_data(as_text=True)
    assert "Your role: viewer." in page and "ada@example.com" in page
    assert "<select" not in page and "Invite" not in page and "zed@example.com" not in page
    assert "Leave Launch team" in page
    for action in ("rename", "delete", "members"):
        refused = _post(bob, bob_csrf, f"/settings/projects/{pid}/{action}", name="Mine")
        assert refused.status_code == 403, action
    # From the page's htmx forms, the refusal goes to the banner, not into the members.
    banner = bob.post(
        f"/settings/projects/{pid}/members/{bob_id}/role",
        data={"role": "owner"},
        headers={"HX-Request": "true", "X-CSRFToken": bob_csrf},
    )
    assert banner.status_code == 403 and "Only the project&#39;s owners may." in banner.text
    assert banner.headers["HX-Retarget"] == banner.headers["HX-Reselect"] == "#banner"
    assert eve.get(f"/settings/projects/{pid}").status_code == 404
    assert eve.get("/settings/projects/999999").status_code == 404
    assert _post(eve, eve_csrf, f"/settings/projects/{pid}/delete").status_code == 404
    assert _post(
        eve, eve_csrf, f"/settings/projects/{pid}/members/{bob_id}/remove"
    ).status_code == (404)

    left = _post(bob, bob_csrf, f"/settings/projects/{pid}/members/{bob_id}/remove")
    assert redirect_path(left) == "/settings/projects"
    assert "You left Launch team." in bob.get("/settings/projects").get_data(as_text=True)
    assert bob.get(f"/settings/projects/{pid}").status_code == 404


def test_htmx_swaps_the_members_with_what_changed(app):
    ada, csrf, _ = _person(app, "ada@example.com")
    _bob, _, bob_id = _person(app, "bob@example.com")
    pid = _make_project(ada, csrf)
    _post(ada, csrf, f"/settings/projects/{pid}/members", email="bob@example.com")
    swapped = ada.post(
        f"/settings/projects/{pid}/members/{bob_id}/role",
        data={"role": "viewer"},
        headers={"HX-Request": "true", "X-CSRFToken": csrf},
    )
    page = swapped.get_data(as_text=True)
    assert swapped.status_code == 200 and 'id="members"' in page
    assert "bob@example.com is viewer now." in page and _role_selected(page, bob_id) == "viewer"


def test_invitations_to_my_address_are_listed_and_joined_only_once_confirmed(app):
    ada, csrf, _ = _person(app, "ada@example.com")
    pid = _make_project(ada, csrf)
    for email in ("carol@example.com", "dan@example.com"):
        _post(ada, csrf, f"/settings/projects/{pid}/members", email=email, role="viewer")
    with app.extensions["database"].session() as session:
        ids = dict(session.execute(select(ProjectInvitation.email, ProjectInvitation.id)).all())

    # Carol signed up herself and never confirmed her address: the mail's link only.
    carol, carol_csrf, _ = _person(app, "carol@example.com", verified=False)
    listing = carol.get("/settings/projects").get_data(as_text=True)
    assert "Launch team" in listing and "as viewer" in listing
    assert "Open the link in the invitation email to join." in listing
    unconfirmed = _post(
        carol, carol_csrf, f"/settings/projects/invitations/{ids['carol@example.com']}/accept"
    )
    assert unconfirmed.status_code == 403
    assert count(app, ProjectMember, ProjectMember.project_id == pid) == 1

    # Dan's address is confirmed: he joins from the list; nobody joins by another's id.
    dan, dan_csrf, _ = _person(app, "dan@example.com")
    assert 'aria-label="Join Launch team"' in dan.get("/settings/projects").get_data(as_text=True)
    stolen = _post(
        carol, carol_csrf, f"/settings/projects/invitations/{ids['dan@example.com']}/accept"
    )
    assert stolen.status_code == 404
    joined = _post(dan, dan_csrf, f"/settings/projects/invitations/{ids['dan@example.com']}/accept")
    assert redirect_path(joined) == f"/settings/projects/{pid}"
    assert "You joined Launch team as viewer." in dan.get(f"/settings/projects/{pid}").text
    twice = _post(dan, dan_csrf, f"/settings/projects/invitations/{ids['dan@example.com']}/accept")
    assert twice.status_code == 409
    with app.extensions["database"].session() as session:
        accepted = session.get(ProjectInvitation, ids["dan@example.com"]).accepted_at
        assert accepted is not None and accepted <= utcnow()
        assert session.scalar(select(User.id).where(User.email == "dan@example.com"))


def test_a_page_form_without_its_csrf_token_is_refused(app):
    ada, csrf, ada_id = _person(app, "ada@example.com")
    pid = _make_project(ada, csrf)
    before = snapshot(app)
    for url in (
        f"/settings/projects/{pid}/rename",
        f"/settings/projects/{pid}/delete",
        f"/settings/projects/{pid}/members",
        f"/settings/projects/{pid}/members/{ada_id}/role",
    ):
        assert ada.post(url, data={"name": "x", "role": "owner"}).status_code == 400, url
    assert snapshot(app) == before
    assert csrf_token_from(ada.get(f"/settings/projects/{pid}").get_data(as_text=True))
