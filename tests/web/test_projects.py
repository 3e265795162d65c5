"""Projects: the API's rules (roles, invitations, the last owner), and every route that
takes a project-scoped id, as owner, editor, viewer and non-member (generated from the
URL map: a new route without a rule here fails the authorization test)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select
from werkzeug.routing import AnyConverter

from app.accounts.models import ApiToken, User
from app.accounts.project_models import Project, ProjectInvitation, ProjectMember
from app.accounts.projects import create_project, token_digest
from app.chat.models import Conversation, QueuedMessage
from app.chat.preset_models import Preset
from app.chat.schedule_models import ChatSchedule
from app.db import utcnow
from app.workspace.models import (
    Attachment,
    Campaign,
    Character,
    Offer,
    Output,
    Persona,
    VisualAsset,
)
from tests.web.helpers import bearer, snapshot


def _tokens(app, auth, *emails) -> dict[str, dict]:
    """People with a bearer token each: {email: {"id", "headers"}}."""
    people = {}
    ids = {email: auth.create(email) for email in emails}
    with app.extensions["database"].session() as session:
        for email, user_id in ids.items():
            token, raw = ApiToken.issue(session.get(User, user_id), "t")
            session.add(token)
            people[email] = {"id": user_id, "headers": bearer(raw)}
        session.commit()
    return people


def test_a_shared_project_from_creation_to_deletion(app, client, auth):
    people = _tokens(app, auth, "ada@example.com", "bob@example.com", "eve@example.com")
    ada, bob, eve = (people[f"{n}@example.com"] for n in ("ada", "bob", "eve"))

    made = client.post("/api/projects", json={"name": "  Launch team "}, headers=ada["headers"])
    assert made.status_code == 201
    project = made.get_json()
    assert (project["name"], project["role"], project["personal"]) == (
        "Launch team",
        "owner",
        False,
    )
    pid = project["id"]
    listed = client.get("/api/projects", headers=ada["headers"]).get_json()["projects"]
    assert [(p["name"], p["role"]) for p in listed] == [
        ("Personal", "owner"),
        ("Launch team", "owner"),
    ]
    assert client.get(f"/api/projects/{pid}", headers=bob["headers"]).status_code == 404

    # An existing account is added at once; adding them again is a conflict.
    added = client.post(
        f"/api/projects/{pid}/members",
        json={"email": "BOB@example.com", "role": "viewer"},
        headers=ada["headers"],
    )
    assert added.status_code == 201 and added.get_json()["member"]["role"] == "viewer"
    again = client.post(
        f"/api/projects/{pid}/members",
        json={"email": "bob@example.com", "role": "editor"},
        headers=ada["headers"],
    )
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "CONFLICT"

    # A viewer reads the workspace but may not change it.
    offer = client.post(
        f"/api/offers?project_id={pid}", json={"name": "Calm Mornings"}, headers=ada["headers"]
    )
    assert offer.status_code == 201
    offer_id = offer.get_json()["id"]
    shared = client.get(f"/api/offers?project_id={pid}", headers=bob["headers"]).get_json()
    assert [o["name"] for o in shared["items"]] == ["Calm Mornings"]
    mine = client.get("/api/offers", headers=bob["headers"]).get_json()
    assert mine["items"] == []  # his personal project is his own
    refused = client.patch(f"/api/offers/{offer_id}", json={"name": "x"}, headers=bob["headers"])
    assert refused.status_code == 403
    assert refused.get_json()["error"] == {
        "code": "PROJECT_ROLE",
        "message": "Your role in this project (viewer) does not allow changes.",
    }
    assert (
        client.post(
            f"/api/offers?project_id={pid}", json={"name": "x"}, headers=bob["headers"]
        ).status_code
        == 403
    )
    assert client.get(f"/api/offers/{offer_id}", headers=eve["headers"]).status_code == 404

    # An address without an account is invited: a link to copy, used once, by its address.
    invited = client.post(
        f"/api/projects/{pid}/members",
        json={"email": "carol@example.com", "role": "editor"},
        headers=ada["headers"],
    )
    assert invited.status_code == 201
    link = invited.get_json()["invitation"]["accept_url"]
    token = link.rsplit("/", 1)[1]
    listing = client.get(f"/api/projects/{pid}/members", headers=ada["headers"]).get_json()
    assert [i["email"] for i in listing["invitations"]] == ["carol@example.com"]
    assert "accept_url" not in listing["invitations"][0]  # shown once
    assert (
        client.get(f"/api/projects/{pid}/members", headers=bob["headers"]).get_json()["invitations"]
        == []
    )
    stolen = client.post("/api/invitations", json={"token": token}, headers=eve["headers"])
    assert stolen.status_code == 404
    carol = _tokens(app, auth, "carol@example.com")["carol@example.com"]
    mine = client.get("/api/invitations", headers=carol["headers"]).get_json()["invitations"]
    assert [(i["project_name"], i["role"]) for i in mine] == [("Launch team", "editor")]
    accepted = client.post("/api/invitations", json={"token": token}, headers=carol["headers"])
    assert accepted.status_code == 201 and accepted.get_json()["role"] == "editor"
    twice = client.post("/api/invitations", json={"token": token}, headers=carol["headers"])
    assert twice.status_code == 409
    edited = client.patch(
        f"/api/offers/{offer_id}", json={"name": "Calmer"}, headers=carol["headers"]
    )
    assert edited.status_code == 200

    # The last owner can be neither demoted nor removed; the members are unchanged.
    before = snapshot(app)
    demote = client.patch(
        f"/api/projects/{pid}/members/{ada['id']}", json={"role": "editor"}, headers=ada["headers"]
    )
    assert demote.status_code == 409
    remove = client.delete(f"/api/projects/{pid}/members/{ada['id']}", headers=ada["headers"])
    assert remove.status_code == 409
    not_owner = client.delete(f"/api/projects/{pid}/members/{ada['id']}", headers=carol["headers"])
    assert not_owner.status_code == 403
    assert snapshot(app) == before

    # Removed, Bob loses the workspace at once; the personal project cannot be deleted.
    assert (
        client.delete(
            f"/api/projects/{pid}/members/{bob['id']}", headers=ada["headers"]
        ).status_code
        == 204
    )
    assert client.get(f"/api/offers/{offer_id}", headers=bob["headers"]).status_code == 404
    personal = listed[0]["id"]
    assert client.delete(f"/api/projects/{personal}", headers=ada["headers"]).status_code == 409

    # Deleting the project deletes its workspace and chats, nothing else.
    chat = client.post("/api/chats", json={"project_id": pid}, headers=carol["headers"])
    assert chat.status_code == 201
    assert (
        client.post("/api/chats", json={"project_id": pid}, headers=eve["headers"]).status_code
        == 404
    )
    assert client.delete(f"/api/projects/{pid}", headers=carol["headers"]).status_code == 403
    assert client.delete(f"/api/projects/{pid}", headers=ada["headers"]).status_code == 204
    with app.extensions["database"].session() as session:
        assert session.get(Project, pid) is None
        assert session.get(Offer, offer_id) is None
        assert session.get(Conversation, chat.get_json()["id"]) is None
        assert session.scalar(select(func.count()).select_from(Project)) == 4  # the personal ones
    assert (
        client.get(
            f"/api/chats/{chat.get_json()['id']}/messages", headers=carol["headers"]
        ).status_code
        == 404
    )


# -- every route with a project-scoped id, as every role ---------------------------------------

# What each route allows: READ (every member), WRITE (owners and editors; a viewer is
# answered 403), MANAGE (owners; editors and viewers 403), OWN (the chat's own person; any
# other member is answered 404, as a non-member is), OWN_ONLY (as OWN, the owner's answer
# not checked: the route needs an id of a card that does not exist), NOBODY (404 for all:
# another address's invitation), ADMIN (403 for all: an admin's route), SELF (removing the
# viewer: owners may, and the viewer themself, leaving; editors 403), SKIP (tested apart).
READ, WRITE, MANAGE, OWN, OWN_ONLY, NOBODY, ADMIN, SELF, SKIP = (
    "read",
    "write",
    "manage",
    "own",
    "own_only",
    "nobody",
    "admin",
    "self",
    "skip",
)
RULES = {
    ("GET", "/admin/conversations/<int:conversation_id>/runs"): ADMIN,
    ("GET", "/admin/conversations/<int:conversation_id>/runs/<int:run_id>"): ADMIN,
    ("GET", "/admin/projects/<int:project_id>"): ADMIN,
    ("GET", "/admin/projects/<int:project_id>/delete"): ADMIN,
    ("POST", "/admin/projects/<int:project_id>/delete"): ADMIN,
    ("DELETE", "/api/assets/<int:asset_id>"): WRITE,
    ("GET", "/api/assets/<int:asset_id>"): READ,
    ("GET", "/api/assets/<int:asset_id>/image"): READ,
    ("GET", "/api/campaigns/<int:campaign_id>"): READ,
    ("GET", "/api/characters/<int:character_id>"): READ,
    ("PATCH", "/api/chats/<int:conversation_id>"): OWN,
    ("POST", "/api/chats/<int:conversation_id>/attachments"): OWN,
    ("PUT", "/api/chats/<int:conversation_id>/branch"): OWN,
    ("GET", "/api/chats/<int:conversation_id>/export"): OWN,
    ("POST", "/api/chats/<int:conversation_id>/loop"): OWN,
    ("GET", "/api/chats/<int:conversation_id>/messages"): OWN,
    ("POST", "/api/chats/<int:conversation_id>/stop"): OWN,
    ("GET", "/api/chats/<int:conversation_id>/context"): OWN,
    # Feedback on a row the test's chat does not have: its owner is answered 404 too.
    ("POST", "/api/chats/<int:conversation_id>/messages/<int:sequence>/feedback"): OWN_ONLY,
    ("DELETE", "/api/chats/<int:conversation_id>/messages/<int:sequence>/feedback"): OWN_ONLY,
    ("POST", "/chats/<int:conversation_id>/messages/<int:sequence>/feedback"): OWN_ONLY,
    ("GET", "/api/chats/<int:conversation_id>/queue"): OWN,
    ("DELETE", "/api/chats/<int:conversation_id>/queue/<int:queued_id>"): OWN,
    ("POST", "/api/chats/<int:conversation_id>/queue/<int:queued_id>/send"): OWN,
    ("POST", "/api/chats/<int:conversation_id>/read"): OWN,
    ("DELETE", "/api/offers/<int:offer_id>"): WRITE,
    ("PATCH", "/api/offers/<int:offer_id>"): WRITE,
    ("GET", "/api/offers/<int:offer_id>"): READ,
    ("DELETE", "/api/outputs/<int:output_id>"): WRITE,
    ("GET", "/api/outputs/<int:output_id>"): READ,
    ("DELETE", "/api/personas/<int:persona_id>"): WRITE,
    ("PATCH", "/api/personas/<int:persona_id>"): WRITE,
    ("GET", "/api/personas/<int:persona_id>"): READ,
    ("GET", "/api/projects/<int:project_id>"): READ,
    ("PATCH", "/api/projects/<int:project_id>"): MANAGE,
    ("DELETE", "/api/projects/<int:project_id>"): MANAGE,
    ("GET", "/api/projects/<int:project_id>/members"): READ,
    ("POST", "/api/projects/<int:project_id>/members"): MANAGE,
    ("PATCH", "/api/projects/<int:project_id>/members/<int:user_id>"): MANAGE,
    ("DELETE", "/api/projects/<int:project_id>/members/<int:user_id>"): SELF,
    ("DELETE", "/api/projects/<int:project_id>/invitations/<int:invitation_id>"): MANAGE,
    ("GET", "/settings/projects/<int:project_id>"): READ,
    ("POST", "/settings/projects/<int:project_id>/rename"): MANAGE,
    ("POST", "/settings/projects/<int:project_id>/delete"): MANAGE,
    ("POST", "/settings/projects/<int:project_id>/members"): MANAGE,
    ("POST", "/settings/projects/<int:project_id>/members/<int:user_id>/role"): MANAGE,
    ("POST", "/settings/projects/<int:project_id>/members/<int:user_id>/remove"): SELF,
    ("POST", "/settings/projects/<int:project_id>/invitations/<int:invitation_id>/revoke"): MANAGE,
    # An invitation to another address: accepted by id by nobody here.
    ("POST", "/settings/projects/invitations/<int:invitation_id>/accept"): NOBODY,
    ("GET", "/chats/<int:conversation_id>"): OWN,
    ("POST", "/chats/<int:conversation_id>/attachments"): OWN,
    ("POST", "/chats/<int:conversation_id>/attachments/<int:attachment_id>/delete"): OWN,
    ("POST", "/chats/<int:conversation_id>/branch"): OWN,
    ("POST", "/chats/<int:conversation_id>/cards/<tool_use_id>"): OWN_ONLY,
    ("POST", "/chats/<int:conversation_id>/delete"): OWN,
    ("POST", "/chats/<int:conversation_id>/edit"): OWN,
    ("GET", "/chats/<int:conversation_id>/export"): OWN,
    ("GET", "/chats/<int:conversation_id>/item"): OWN,
    ("POST", "/chats/<int:conversation_id>/messages"): OWN,
    ("POST", "/chats/<int:conversation_id>/regenerate"): OWN,
    ("GET", "/chats/<int:conversation_id>/rename"): OWN,
    ("POST", "/chats/<int:conversation_id>/rename"): OWN,
    ("POST", "/chats/<int:conversation_id>/stop"): OWN,
    ("POST", "/chats/<int:conversation_id>/queue"): OWN,
    ("POST", "/chats/<int:conversation_id>/steer"): OWN,
    ("POST", "/chats/<int:conversation_id>/queue/<int:queued_id>/delete"): OWN,
    ("POST", "/chats/<int:conversation_id>/queue/<int:queued_id>/send"): OWN,
    ("POST", "/chats/<int:conversation_id>/organize"): OWN,
    ("GET", "/chats/<int:conversation_id>/folder"): OWN,
    ("PATCH", "/chats/<int:conversation_id>/model"): OWN,
    ("POST", "/chats/<int:conversation_id>/model"): OWN,
    ("POST", "/api/chats/<int:conversation_id>/share"): OWN,
    ("GET", "/api/chats/<int:conversation_id>/share"): OWN,
    ("DELETE", "/api/chats/<int:conversation_id>/share"): OWN,
    ("POST", "/chats/<int:conversation_id>/share"): OWN,
    ("POST", "/chats/<int:conversation_id>/share/revoke"): OWN,
    ("POST", "/api/chats/<int:conversation_id>/schedules"): OWN,
    ("GET", "/api/chats/<int:conversation_id>/schedules"): OWN,
    ("PATCH", "/api/chats/<int:conversation_id>/schedules/<int:schedule_id>"): OWN,
    ("DELETE", "/api/chats/<int:conversation_id>/schedules/<int:schedule_id>"): OWN,
    ("POST", "/chats/<int:conversation_id>/schedules"): OWN,
    ("POST", "/chats/<int:conversation_id>/schedules/<int:schedule_id>/pause"): OWN,
    ("POST", "/chats/<int:conversation_id>/schedules/<int:schedule_id>/delete"): OWN,
    # Links whose token is the credential: one nobody holds is 404 for every role.
    ("GET", "/reset/<token>"): NOBODY,
    ("POST", "/reset/<token>"): NOBODY,
    ("GET", "/verify/<token>"): NOBODY,
    ("GET", "/s/<token>"): NOBODY,
    ("POST", "/s/<token>/continue"): NOBODY,
    ("GET", "/invitations/<token>"): NOBODY,
    ("POST", "/invitations/<token>"): NOBODY,
    ("GET", "/workspace/assets/<int:asset_id>"): READ,
    ("POST", "/workspace/assets/<int:asset_id>/delete"): WRITE,
    ("GET", "/workspace/assets/<int:asset_id>/view"): READ,
    ("POST", "/workspace/offers/<int:offer_id>/delete"): WRITE,
    ("GET", "/workspace/offers/<int:offer_id>/edit"): READ,
    ("POST", "/workspace/offers/<int:offer_id>/edit"): WRITE,
    ("GET", "/workspace/outputs/<int:output_id>"): READ,
    ("POST", "/workspace/outputs/<int:output_id>/delete"): WRITE,
    ("POST", "/workspace/personas/<int:persona_id>/delete"): WRITE,
    ("GET", "/workspace/personas/<int:persona_id>/edit"): READ,
    ("POST", "/workspace/personas/<int:persona_id>/edit"): WRITE,
    ("GET", "/ws/chats/<int:conversation_id>"): SKIP,  # tests/web/test_sockets.py
    # A person's own preset (the owner's here): theirs alone, whatever the project.
    ("GET", "/api/presets/<int:preset_id>"): OWN,
    ("PATCH", "/api/presets/<int:preset_id>"): OWN,
    ("DELETE", "/api/presets/<int:preset_id>"): OWN,
    ("GET", "/settings/presets/<int:preset_id>/edit"): OWN,
    ("POST", "/settings/presets/<int:preset_id>"): OWN,
    ("POST", "/settings/presets/<int:preset_id>/delete"): OWN,
    ("GET", "/admin/presets/<int:preset_id>/edit"): ADMIN,
    ("POST", "/admin/presets/<int:preset_id>"): ADMIN,
    ("POST", "/admin/presets/<int:preset_id>/delete"): ADMIN,
}
SCOPED = {
    "project_id",
    "offer_id",
    "persona_id",
    "output_id",
    "asset_id",
    "character_id",
    "campaign_id",
    "conversation_id",
    "token",
    "invitation_id",
    "preset_id",
    "schedule_id",
}
ROLES = ("owner", "editor", "viewer", "outsider")


def _expected(rule: str, role: str) -> str:
    """ "allowed" (any answer but 403 and 404), or the status the role must get."""
    if rule == ADMIN:
        return "403"
    if rule == NOBODY or role == "outsider":
        return "404"
    if rule == SELF:
        return "403" if role == "editor" else "allowed"
    if rule in (OWN, OWN_ONLY):
        return ("any" if rule == OWN_ONLY else "allowed") if role == "owner" else "404"
    if rule == READ:
        return "allowed"
    if rule == WRITE:
        return "403" if role == "viewer" else "allowed"
    return "allowed" if role == "owner" else "403"  # MANAGE


def _world(app, people) -> dict:
    """A project whose owner, editor and viewer are the people of those roles, with one of
    everything in its workspace and a chat of the owner's."""
    owner, editor, viewer = (people[role]["id"] for role in ("owner", "editor", "viewer"))
    with app.extensions["database"].session() as session:
        project = create_project(session, owner, "Team")
        session.add_all(
            [
                ProjectMember(project_id=project.id, user_id=editor, role="editor"),
                ProjectMember(project_id=project.id, user_id=viewer, role="viewer"),
            ]
        )
        scoped = {"user_id": owner, "project_id": project.id}
        chat = Conversation(title="Plans", **scoped)
        offer = Offer(name="Offer", **scoped)
        session.add_all([chat, offer])
        session.flush()
        rows = {
            "persona_id": Persona(name="P", **scoped),
            "output_id": Output(agent="quiz", title="Q", content={}, **scoped),
            "asset_id": VisualAsset(title="A", **scoped),
            "character_id": Character(name="C", **scoped),
            "campaign_id": Campaign(name="C", **scoped),
            "queued_id": QueuedMessage(conversation_id=chat.id, content="Later"),
            "schedule_id": ChatSchedule(
                conversation_id=chat.id,
                user_id=owner,
                cron="0 9 * * *",
                timezone="UTC",
                message="Hi",
                next_run_at=utcnow() + timedelta(days=1),
            ),
            "attachment_id": Attachment(
                user_id=owner,
                conversation_id=chat.id,
                filename="a.txt",
                content_type="text/plain",
                size=1,
                data=b"a",
            ),
        }
        rows["preset_id"] = Preset(user_id=owner, name=f"Preset of {project.id}")
        rows["invitation_id"] = ProjectInvitation(
            project_id=project.id,
            email="newcomer@example.com",
            role="editor",
            token_digest=token_digest(f"world-{project.id}"),
            invited_by_id=owner,
            expires_at=utcnow() + timedelta(days=7),
        )
        session.add_all(rows.values())
        session.flush()
        ids = {name: row.id for name, row in rows.items()}
        session.commit()
        return {
            **ids,
            "project_id": project.id,
            "conversation_id": chat.id,
            "offer_id": offer.id,
            "user_id": viewer,
            "run_id": 1,
            "tool_use_id": "toolu_none",
            "sequence": 1,
            "token": "not-an-invitation",
        }


def test_every_role_gets_the_documented_answer_on_every_project_route(app, client, auth):
    emails = {role: f"{role}@example.com" for role in ROLES}
    by_email = _tokens(app, auth, *emails.values())
    people = {role: by_email[email] for role, email in emails.items()}
    routes = [
        (rule, method)
        for rule in app.url_map.iter_rules()
        if set(rule.arguments) & SCOPED
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"})
    ]
    missing = [f"{m} {r.rule}" for r, m in routes if (m, r.rule) not in RULES]
    assert not missing, f"add a rule for: {missing}"
    checked = 0
    world = _world(app, people)
    for rule, method in routes:
        kind = RULES[(method, rule.rule)]
        if kind == SKIP:
            continue
        for role in ROLES:
            if method != "GET":
                world = _world(app, people)  # a change (a delete) leaves the next one its own
            values = {
                name: next(iter(rule._converters[name].items))
                if isinstance(rule._converters[name], AnyConverter)
                else world[name]
                for name in rule.arguments
            }
            url = rule.build(values)[1]
            response = client.open(url, method=method, headers=people[role]["headers"])
            expected = _expected(kind, role)
            status = response.status_code
            where = f"{method} {rule.rule} as {role}: {status}"
            assert status < 500, where
            if expected == "allowed":
                assert status not in (403, 404), where
            elif expected != "any":
                assert str(status) == expected, where
            checked += 1
    assert checked >= 200


def test_the_chat_page_names_the_project_for_a_person_in_several(app, client, auth):
    auth.create()
    auth.login()
    chat = client.post("/api/chats", json={}, headers=auth.headers()).get_json()["id"]
    assert 'id="chat-project"' not in client.get(f"/chats/{chat}").get_data(as_text=True)
    team = client.post("/api/projects", json={"name": "Launch team"}, headers=auth.headers())
    team_chat = client.post(
        "/api/chats", json={"project_id": team.get_json()["id"]}, headers=auth.headers()
    ).get_json()["id"]
    page = client.get(f"/chats/{team_chat}").get_data(as_text=True)
    assert "Project: </span>Launch team</span>" in page
    assert "Project: </span>Personal</span>" in client.get(f"/chats/{chat}").get_data(as_text=True)


def test_the_workspace_pages_show_the_project_switched_to(app, client, auth):
    from tests.factories import csrf_token_from

    auth.create("owner@example.com")
    auth.create()
    auth.login()
    assert "project-switch" not in client.get("/workspace/offers").get_data(as_text=True)
    with app.extensions["database"].session() as session:
        owner = session.scalar(select(User.id).where(User.email == "owner@example.com"))
        ada = session.scalar(select(User.id).where(User.email == "ada@example.com"))
        team = create_project(session, owner, "Launch team")
        session.add(ProjectMember(project_id=team.id, user_id=ada, role="viewer"))
        session.add(Offer(user_id=owner, project_id=team.id, name="Team Offer"))
        team_id = team.id
        session.commit()
    page = client.get("/workspace/offers").get_data(as_text=True)
    assert "Launch team (viewer)" in page and "Team Offer" not in page
    switched = client.post(
        "/projects/current",
        data={"project_id": team_id, "next": "/workspace/offers", "csrf_token": auth.csrf},
    )
    assert switched.status_code == 302 and switched.location.endswith("/workspace/offers")
    assert "Team Offer" in client.get("/workspace/offers").get_data(as_text=True)
    form = client.get("/workspace/offers/new").get_data(as_text=True)
    refused = client.post(
        "/workspace/offers/new", data={"name": "Mine", "csrf_token": csrf_token_from(form)}
    )
    assert refused.status_code == 403  # a viewer adds nothing to the team's workspace
    foreign = client.post("/projects/current", data={"project_id": 999999, "csrf_token": auth.csrf})
    assert foreign.status_code == 404
