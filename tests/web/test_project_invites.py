"""Invitations by mail, end to end against a real SMTP server (the mail it received, its
link followed by the invited person after signing up), and the API's changes: `mailed`,
leaving a project, revoking an invitation."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from app.accounts.project_models import ProjectInvitation, ProjectMember
from tests.factories import PASSWORD, AuthActions, csrf_token_from
from tests.mail.smtp_server import link_in
from tests.web.helpers import anonymous_csrf, count, json_error, snapshot


@pytest.fixture
def mail_app(make_app, smtp):
    return make_app(smtp_url=smtp.url, public_url="https://chat.example.com")


def _owner(app, email="ada@example.com"):
    """A logged-in person's client and the headers its fetch calls send."""
    client = app.test_client()
    auth = AuthActions(app, client)
    auth.create(email)
    auth.login(email)
    return client, auth.headers()


def _project(client, headers, name="Launch team") -> int:
    made = client.post("/api/projects", json={"name": name}, headers=headers)
    assert made.status_code == 201
    return made.get_json()["id"]


def _invite(client, headers, pid, email, role="editor"):
    return client.post(
        f"/api/projects/{pid}/members", json={"email": email, "role": role}, headers=headers
    )


def test_the_invited_person_signs_up_follows_the_mailed_link_and_joins(mail_app, smtp):
    app = mail_app
    ada, headers = _owner(app)
    pid = _project(ada, headers)

    invited = _invite(ada, headers, pid, "Grace@Example.com")
    assert invited.status_code == 201
    answer = invited.get_json()
    assert answer["mailed"] is True
    [mail] = smtp.wait_for(1)
    assert mail["To"] == "grace@example.com"
    assert mail["Subject"] == 'ada invites you to "Launch team" on Loopdesk'
    link = urlsplit(link_in(mail))
    assert f"{link.scheme}://{link.netloc}" == "https://chat.example.com"
    assert link_in(mail) == answer["invitation"]["accept_url"]

    # Grace signs up with that address, opens the link, and joins.
    grace = app.test_client()
    signed_up = grace.post(
        "/signup",
        data={
            "email": "grace@example.com",
            "password": PASSWORD,
            "confirm": PASSWORD,
            "csrf_token": anonymous_csrf(grace),
        },
    )
    assert signed_up.status_code == 302
    page = grace.get(link.path)
    assert page.status_code == 200 and "Join Launch team" in page.get_data(as_text=True)
    joined = grace.post(link.path, data={"csrf_token": csrf_token_from(page.text)})
    assert joined.status_code == 302
    projects = grace.get("/settings/projects").get_data(as_text=True)
    assert "Launch team" in projects and ">editor</span>" in projects
    assert "You joined Launch team as editor." in projects
    assert grace.get(f"/settings/projects/{pid}").status_code == 200

    # Used once; anyone else's account gets 404, as for a link that never was.
    again = grace.post(link.path, data={"csrf_token": csrf_token_from(page.text)})
    assert again.status_code == 409
    eve, _ = _owner(app, "eve@example.com")
    assert eve.get(link.path).status_code == 404


def test_an_account_added_at_once_gets_a_note(mail_app, smtp):
    app = mail_app
    AuthActions(app, app.test_client()).create("bob@example.com")
    ada, headers = _owner(app)
    pid = _project(ada, headers)
    added = _invite(ada, headers, pid, "bob@example.com", "viewer")
    assert added.status_code == 201
    assert added.get_json()["member"]["role"] == "viewer" and added.get_json()["mailed"] is True
    [mail] = smtp.wait_for(1)
    assert mail["Subject"] == 'ada added you to "Launch team" on Loopdesk'
    assert link_in(mail) == f"https://chat.example.com/settings/projects/{pid}"


def test_the_page_says_the_invitation_was_sent(mail_app, smtp):
    app = mail_app
    ada, headers = _owner(app)
    pid = _project(ada, headers)
    sent = ada.post(
        f"/settings/projects/{pid}/members",
        data={"email": "grace@example.com", "role": "viewer", "csrf_token": headers["X-CSRFToken"]},
    )
    text = sent.get_data(as_text=True)
    assert sent.status_code == 201
    assert "The invitation was sent to grace@example.com." in text
    assert "invitation-link" not in text  # the link went by mail, not to the owner's screen
    assert smtp.wait_for(1)[0]["To"] == "grace@example.com"


def test_without_smtp_the_answer_says_not_mailed_and_carries_the_link(app, client, auth):
    auth.create()
    auth.login()
    pid = _project(client, auth.headers())
    invited = _invite(client, auth.headers(), pid, "grace@example.com")
    body = invited.get_json()
    assert invited.status_code == 201 and body["mailed"] is False
    assert body["invitation"]["accept_url"].startswith("http://localhost/invitations/")


def test_a_member_leaves_and_the_last_owner_cannot(app):
    ada, ada_headers = _owner(app)
    bob, bob_headers = _owner(app, "bob@example.com")
    pid = _project(ada, ada_headers)
    bob_id = _invite(ada, ada_headers, pid, "bob@example.com", "viewer").get_json()["member"][
        "user_id"
    ]
    ada_id = ada.get(f"/api/projects/{pid}/members", headers=ada_headers).get_json()["members"][0][
        "user_id"
    ]
    assert json_error(bob.delete(f"/api/projects/{pid}/members/{ada_id}", headers=bob_headers), 403)
    before = snapshot(app)
    last = ada.delete(f"/api/projects/{pid}/members/{ada_id}", headers=ada_headers)
    assert json_error(last, 409) == "CONFLICT"
    assert "at least one owner" in last.get_json()["error"]["message"]
    assert snapshot(app) == before

    left = bob.delete(f"/api/projects/{pid}/members/{bob_id}", headers=bob_headers)
    assert left.status_code == 204
    assert bob.get(f"/api/projects/{pid}", headers=bob_headers).status_code == 404
    assert count(app, ProjectMember, ProjectMember.project_id == pid) == 1
    personal = bob.get("/api/projects", headers=bob_headers).get_json()["projects"][0]["id"]
    own = bob.delete(f"/api/projects/{personal}/members/{bob_id}", headers=bob_headers)
    assert json_error(own, 409) == "CONFLICT"


def test_an_owner_revokes_an_invitation_and_its_link_stops_working(app):
    ada, headers = _owner(app)
    pid = _project(ada, headers)
    other = _project(ada, headers, "Other")
    invitation = _invite(ada, headers, pid, "grace@example.com").get_json()["invitation"]
    elsewhere = _invite(ada, headers, other, "hal@example.com").get_json()["invitation"]
    path = urlsplit(invitation["accept_url"]).path

    wrong_project = ada.delete(
        f"/api/projects/{pid}/invitations/{elsewhere['id']}", headers=headers
    )
    assert json_error(wrong_project, 404) == "NOT_FOUND"
    assert ada.delete(f"/api/projects/{pid}/invitations/999999", headers=headers).status_code == 404
    revoked = ada.delete(f"/api/projects/{pid}/invitations/{invitation['id']}", headers=headers)
    assert revoked.status_code == 204
    assert count(app, ProjectInvitation, ProjectInvitation.id == invitation["id"]) == 0
    assert count(app, ProjectInvitation, ProjectInvitation.id == elsewhere["id"]) == 1
    assert ada.get(f"/api/projects/{pid}/members", headers=headers).get_json()["invitations"] == []
    again = ada.delete(f"/api/projects/{pid}/invitations/{invitation['id']}", headers=headers)
    assert again.status_code == 404

    grace, _ = _owner(app, "grace@example.com")
    assert grace.get(path).status_code == 404
    assert "Launch team" not in grace.get("/settings/projects").get_data(as_text=True)


def test_inviting_an_address_again_replaces_its_open_invitation(app):
    ada, headers = _owner(app)
    pid = _project(ada, headers)
    first = _invite(ada, headers, pid, "grace@example.com", "viewer").get_json()["invitation"]
    second = _invite(ada, headers, pid, "Grace@example.com", "editor").get_json()["invitation"]
    pending = ada.get(f"/api/projects/{pid}/members", headers=headers).get_json()["invitations"]
    assert [(i["email"], i["role"]) for i in pending] == [("grace@example.com", "editor")]

    grace, _ = _owner(app, "grace@example.com")
    assert grace.get(urlsplit(first["accept_url"]).path).status_code == 404
    assert grace.get(urlsplit(second["accept_url"]).path).status_code == 200


def test_a_slow_mail_server_never_holds_the_invitation(mail_app, smtp):
    ada, headers = _owner(mail_app)
    pid = _project(ada, headers)
    smtp.answering.clear()
    try:
        invited = _invite(ada, headers, pid, "grace@example.com")
        assert invited.status_code == 201 and invited.get_json()["mailed"] is True
        assert smtp.mails == []  # answered while the server still holds the mail
    finally:
        smtp.answering.set()
    assert smtp.wait_for(1)[0]["To"] == "grace@example.com"


def test_an_address_without_an_at_is_refused_as_the_document_says(app, client, auth):
    # The OpenAPI document describes the address the route takes: a client that follows
    # it is never refused (the fuzzer found a schema-valid "q\x94\xb5\x92" refused).
    auth.create()
    auth.login()
    pid = _project(client, auth.headers())
    document = client.get("/api/openapi.json").get_json()
    described = document["components"]["schemas"]["MemberAdd"]["properties"]["email"]
    assert described["pattern"] == "@"
    refused = _invite(client, auth.headers(), pid, "q\x94\xb5\x92")
    assert json_error(refused, 400) == "INVALID_FIELD"
    assert refused.get_json()["error"]["field"] == "email"
    assert _invite(client, auth.headers(), pid, "grace@example.com").status_code == 201


def test_a_blank_project_name_is_refused_as_the_document_says(app, client, auth):
    auth.create()
    auth.login()
    document = client.get("/api/openapi.json").get_json()
    assert document["components"]["schemas"]["ProjectCreate"]["properties"]["name"]["pattern"]
    refused = client.post("/api/projects", json={"name": " \u0085 "}, headers=auth.headers())
    assert json_error(refused, 400) == "INVALID_FIELD"
