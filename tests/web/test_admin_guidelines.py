"""The shared guidelines in the admin area: the htmx page and the JSON API, admins only,
every change recorded with who made it."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.agents.guidelines import guidelines_from_file
from app.agents.models import Guideline, GuidelineChange
from tests.factories import add_token
from tests.web.helpers import alerts, bearer, count, json_error, snapshot

FILE_RULES = [rule.text for rule in guidelines_from_file()]
HTMX = {"HX-Request": "true"}


@pytest.fixture
def admin(auth):
    user_id = auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    return user_id


def rows(app) -> list[Guideline]:
    with app.extensions["database"].session() as session:
        return list(session.scalars(select(Guideline).order_by(Guideline.position)))


def changes(app, action=None) -> list[GuidelineChange]:
    with app.extensions["database"].session() as session:
        query = select(GuidelineChange).order_by(GuidelineChange.id)
        if action:
            query = query.where(GuidelineChange.action == action)
        return list(session.scalars(query))


def post(client, auth, url, data=None):
    return client.post(url, data=data or {}, headers={**auth.headers(), **HTMX})


def put(client, auth, body):
    return client.put("/api/admin/guidelines", json=body, headers=auth.headers())


# -- who may -------------------------------------------------------------------------------


def test_non_admin_gets_403_everywhere(app, client, auth, user):
    client.get("/login")  # nothing seeded by anyone yet
    before = snapshot(app)
    for url in (
        "/admin/guidelines",
        "/admin/guidelines/1",
        "/admin/guidelines/1/edit",
        "/admin/guidelines/preview",
        "/admin/guidelines/history",
    ):
        assert client.get(url).status_code == 403, url
    for url in (
        "/admin/guidelines",
        "/admin/guidelines/1/edit",
        "/admin/guidelines/1/enable",
        "/admin/guidelines/1/disable",
        "/admin/guidelines/1/move/up",
        "/admin/guidelines/1/delete",
    ):
        response = client.post(url, data={"text": "x", "csrf_token": auth.csrf})
        assert response.status_code == 403, url
    assert json_error(client.get("/api/admin/guidelines"), 403) == "FORBIDDEN"
    response = put(client, auth, {"rules": []})
    assert json_error(response, 403) == "FORBIDDEN"
    assert snapshot(app) == before


def test_non_admin_bearer_token_gets_403(app, client, user):
    _, raw = add_token(app, user)
    assert json_error(client.get("/api/admin/guidelines", headers=bearer(raw)), 403)
    response = client.put("/api/admin/guidelines", json={"rules": []}, headers=bearer(raw))
    # Refused by the token's scopes already (a non-admin cannot hold "admin").
    assert json_error(response, 403) == "INSUFFICIENT_SCOPE"


def test_anonymous_api_is_401(client):
    assert json_error(client.get("/api/admin/guidelines"), 401) == "UNAUTHORIZED"


# -- the page ------------------------------------------------------------------------------


def test_admin_page_lists_rules_preview_and_history(app, client, admin):
    response = client.get("/admin/guidelines")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    positions = [html.index(f'<p class="guideline-text">{rule}</p>') for rule in FILE_RULES]
    assert positions == sorted(positions)
    assert 'id="prompt-preview"' in html and 'id="preview-agent"' in html
    assert 'hx-trigger="guidelines-changed from:body"' in html
    assert html.count('data-action="seeded"') == len(FILE_RULES)
    assert 'href="/admin/users"' in html
    assert 'href="/admin/guidelines"' in client.get("/admin/users").get_data(as_text=True)
    # Reading the page twice seeds once.
    client.get("/admin/guidelines")
    assert len(rows(app)) == len(FILE_RULES)


def test_preview_shows_the_chosen_agents_final_prompt(client, admin):
    html = client.get("/admin/guidelines/preview?agent=ad-copy").get_data(as_text=True)
    assert 'data-agent="ad-copy"' in html
    assert "## Shared guidelines" in html
    assert client.get("/admin/guidelines/preview?agent=nope").status_code == 404
    page = client.get("/admin/guidelines?agent=landing-page").get_data(as_text=True)
    assert 'data-agent="landing-page"' in page


def test_admin_adds_a_rule(app, client, auth, admin):
    client.get("/admin/guidelines")
    response = post(client, auth, "/admin/guidelines", {"text": "  Keep it   short.\n"})
    assert response.status_code == 200
    assert response.headers["HX-Trigger"] == "guidelines-changed"
    html = response.get_data(as_text=True)
    assert html.startswith('<section id="guidelines"')
    assert "Keep it short." in html
    assert [g.text for g in rows(app)][-1] == "Keep it short."
    [added] = changes(app, "added")
    assert (added.user_id, added.before, added.after) == (admin, None, "Keep it short.")
    assert added.guideline_id == rows(app)[-1].id
    preview = client.get("/admin/guidelines/preview").get_data(as_text=True)
    assert "- Keep it short." in preview
    history = client.get("/admin/guidelines/history").get_data(as_text=True)
    assert "root@example.com" in history and 'data-action="added"' in history


def test_plain_form_post_redirects_back(app, client, auth, admin):
    response = client.post(
        "/admin/guidelines", data={"text": "No jargon.", "csrf_token": auth.csrf}
    )
    assert response.status_code == 302
    assert response.headers["Location"].endswith("/admin/guidelines")
    assert "No jargon." in [g.text for g in rows(app)]


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "write the rule"), ("   \n ", "write the rule"), ("x" * 1001, "1000 characters")],
    ids=["empty", "blank", "too-long"],
)
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain"])
def test_add_with_bad_input_is_400(app, client, auth, admin, text, message, htmx):
    client.get("/admin/guidelines")
    before = snapshot(app)
    headers = {**auth.headers(), **(HTMX if htmx else {})}
    response = client.post("/admin/guidelines", data={"text": text}, headers=headers)
    assert response.status_code == 400
    assert any(message in alert.lower() for alert in alerts(response)), alerts(response)
    assert snapshot(app) == before


def test_add_without_csrf_token_saves_nothing(app, client, admin):
    client.get("/admin/guidelines")
    before = snapshot(app)
    response = client.post("/admin/guidelines", data={"text": "Sneaky."})
    assert response.status_code == 400
    assert snapshot(app) == before


def test_admin_edits_a_rule_inline(app, client, auth, admin):
    client.get("/admin/guidelines")
    rule = rows(app)[1]
    form = client.get(f"/admin/guidelines/{rule.id}/edit", headers=HTMX)
    assert form.status_code == 200
    assert f'id="guideline-{rule.id}"' in form.get_data(as_text=True)
    assert "<textarea" in form.get_data(as_text=True)

    response = post(client, auth, f"/admin/guidelines/{rule.id}/edit", {"text": "Never use lines."})
    assert response.status_code == 200
    assert response.headers["HX-Trigger"] == "guidelines-changed"
    assert "Never use lines." in response.get_data(as_text=True)
    assert rows(app)[1].text == "Never use lines."
    [edited] = changes(app, "edited")
    assert (edited.before, edited.after, edited.user_id) == (rule.text, "Never use lines.", admin)

    cancel = client.get(f"/admin/guidelines/{rule.id}", headers=HTMX)
    assert "Never use lines." in cancel.get_data(as_text=True)


@pytest.mark.parametrize("text", ["", "y" * 1001], ids=["empty", "too-long"])
def test_edit_with_bad_input_is_400(app, client, auth, admin, text):
    client.get("/admin/guidelines")
    rule = rows(app)[0]
    before = snapshot(app)
    response = post(client, auth, f"/admin/guidelines/{rule.id}/edit", {"text": text})
    assert response.status_code == 400
    assert alerts(response)
    assert f'id="guideline-{rule.id}"' in response.get_data(as_text=True)
    assert snapshot(app) == before


def test_admin_disables_and_enables_a_rule(app, client, auth, admin):
    client.get("/admin/guidelines")
    rule = rows(app)[2]
    response = post(client, auth, f"/admin/guidelines/{rule.id}/disable")
    assert response.status_code == 200
    assert 'data-enabled="false"' in response.get_data(as_text=True)
    assert rows(app)[2].enabled is False
    assert rule.text not in client.get("/admin/guidelines/preview").get_data(as_text=True)
    post(client, auth, f"/admin/guidelines/{rule.id}/disable")  # already: no new entry
    post(client, auth, f"/admin/guidelines/{rule.id}/enable")
    assert rows(app)[2].enabled is True
    assert [c.action for c in changes(app) if c.action != "seeded"] == ["disabled", "enabled"]
    assert rule.text in client.get("/admin/guidelines/preview").get_data(as_text=True)


def test_admin_moves_a_rule(app, client, auth, admin):
    client.get("/admin/guidelines")
    first, second = rows(app)[:2]
    response = post(client, auth, f"/admin/guidelines/{second.id}/move/up")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert html.index(second.text) < html.index(first.text)
    assert [g.id for g in rows(app)][:2] == [second.id, first.id]
    [moved] = changes(app, "moved")
    assert (moved.guideline_id, moved.before, moved.after) == (second.id, "2", "1")
    # Already first: nothing to do, nothing recorded.
    post(client, auth, f"/admin/guidelines/{second.id}/move/up")
    assert len(changes(app, "moved")) == 1
    last = rows(app)[-1]
    post(client, auth, f"/admin/guidelines/{last.id}/move/down")
    assert rows(app)[-1].id == last.id
    post(client, auth, f"/admin/guidelines/{second.id}/move/down")
    assert [g.id for g in rows(app)][:2] == [first.id, second.id]
    assert [g.position for g in rows(app)] == list(range(1, len(FILE_RULES) + 1))


def test_admin_deletes_a_rule(app, client, auth, admin):
    client.get("/admin/guidelines")
    rule = rows(app)[0]
    response = post(client, auth, f"/admin/guidelines/{rule.id}/delete")
    assert response.status_code == 200
    assert rule.text not in response.get_data(as_text=True)
    assert rule.text not in [g.text for g in rows(app)]
    assert [g.position for g in rows(app)] == list(range(1, len(FILE_RULES)))
    [deleted] = changes(app, "deleted")
    assert (deleted.before, deleted.after, deleted.user_id) == (rule.text, None, admin)
    # The rule's earlier history stays, unlinked.
    seeded = [c for c in changes(app, "seeded") if c.after == rule.text]
    assert len(seeded) == 1 and seeded[0].guideline_id is None
    assert post(client, auth, f"/admin/guidelines/{rule.id}/delete").status_code == 404


# -- the API -------------------------------------------------------------------------------


def test_api_get_lists_rules_in_order(client, admin):
    response = client.get("/api/admin/guidelines")
    assert response.status_code == 200
    rules = response.get_json()["rules"]
    assert [r["text"] for r in rules] == FILE_RULES
    assert [r["position"] for r in rules] == list(range(1, len(FILE_RULES) + 1))
    assert all(set(r) == {"id", "text", "enabled", "position"} and r["enabled"] for r in rules)


def test_api_put_replaces_the_whole_list(app, client, auth, admin):
    a, b, c, d, e = client.get("/api/admin/guidelines").get_json()["rules"][:5]
    body = {
        "rules": [
            {"id": c["id"], "text": c["text"]},
            {"text": "A brand new rule."},
            {"id": a["id"], "text": "A, edited.", "enabled": False},
            {"id": b["id"], "text": b["text"], "position": 99},  # position is ignored
            {"text": "New and off.", "enabled": False},
        ]
    }
    response = put(client, auth, body)
    assert response.status_code == 200, response.get_json()
    rules = response.get_json()["rules"]
    assert rules == client.get("/api/admin/guidelines").get_json()["rules"]
    assert [r["text"] for r in rules] == [
        c["text"],
        "A brand new rule.",
        "A, edited.",
        b["text"],
        "New and off.",
    ]
    assert [r["enabled"] for r in rules] == [True, True, False, True, False]
    assert [r["position"] for r in rules] == [1, 2, 3, 4, 5]
    assert [r["id"] for r in rules][0] == c["id"] and rules[2]["id"] == a["id"]
    assert {d["id"], e["id"]}.isdisjoint(r["id"] for r in rules)

    recorded = [(x.action, x.guideline_id, x.before, x.after) for x in changes(app)]
    recorded = [r for r in recorded if r[0] != "seeded"]
    assert ("deleted", None, d["text"], None) in recorded
    assert ("deleted", None, e["text"], None) in recorded
    assert ("added", rules[1]["id"], None, "A brand new rule.") in recorded
    assert ("added", rules[4]["id"], None, "New and off.") in recorded
    assert ("disabled", rules[4]["id"], None, "New and off.") in recorded
    assert ("edited", a["id"], a["text"], "A, edited.") in recorded
    assert ("disabled", a["id"], None, "A, edited.") in recorded
    # Among the kept rules (a, b, c), c went from last to first: a and b each moved too.
    assert ("moved", c["id"], "3", "1") in recorded
    assert ("moved", a["id"], "1", "3") in recorded
    assert ("moved", b["id"], "2", "4") in recorded
    assert len(recorded) == 10
    assert all(x.user_id == admin for x in changes(app) if x.action != "seeded")


def test_api_put_keeps_enabled_when_left_out(app, client, auth, admin):
    rules = client.get("/api/admin/guidelines").get_json()["rules"]
    assert (
        put(
            client,
            auth,
            {"rules": [{"id": rules[0]["id"], "text": rules[0]["text"], "enabled": False}]},
        ).status_code
        == 200
    )
    response = put(client, auth, {"rules": [{"id": rules[0]["id"], "text": rules[0]["text"]}]})
    assert response.get_json()["rules"][0]["enabled"] is False
    assert len(changes(app, "disabled")) == 1
    assert changes(app, "moved") == []


def test_api_put_empty_list_deletes_all_and_stays_empty(app, client, auth, admin):
    client.get("/api/admin/guidelines")
    assert put(client, auth, {"rules": []}).get_json() == {"rules": []}
    assert client.get("/api/admin/guidelines").get_json() == {"rules": []}
    assert rows(app) == []


def test_api_put_with_a_bearer_token_needs_no_csrf(app, admin):
    _, raw = add_token(app, admin, scopes=("admin",))
    response = app.test_client().put(
        "/api/admin/guidelines", json={"rules": [{"text": "Only rule."}]}, headers=bearer(raw)
    )
    assert response.status_code == 200, response.get_json()
    assert [g.text for g in rows(app)] == ["Only rule."]
    assert changes(app, "added")[0].user_id == admin


BAD_BODIES = {
    "rules-missing": {},
    "rules-not-a-list": {"rules": {"text": "x"}},
    "unknown-top-field": {"rules": [], "extra": 1},
    "item-not-object": {"rules": ["Be nice."]},
    "text-missing": {"rules": [{"enabled": True}]},
    "text-not-string": {"rules": [{"text": 5}]},
    "text-empty": {"rules": [{"text": ""}]},
    "text-blank": {"rules": [{"text": "  \n "}]},
    "text-too-long": {"rules": [{"text": "z" * 1001}]},
    "id-not-int": {"rules": [{"id": "1", "text": "x"}]},
    "id-bool": {"rules": [{"id": True, "text": "x"}]},
    "unknown-id": {"rules": [{"id": 9999, "text": "x"}]},
    "enabled-not-bool": {"rules": [{"text": "x", "enabled": "yes"}]},
    "unknown-item-field": {"rules": [{"text": "x", "colour": "red"}]},
    "too-many": {"rules": [{"text": f"Rule {n}."} for n in range(51)]},
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_api_put_bad_input_is_400_and_changes_nothing(app, client, auth, admin, body):
    rules = client.get("/api/admin/guidelines").get_json()["rules"]
    before = snapshot(app)
    # A good rule first: the bad one after it must not leave it half-applied.
    if isinstance(body.get("rules"), list) and len(body["rules"]) < 50:
        body = {**body, "rules": [{"text": "Good."}, *body["rules"]]}
    response = put(client, auth, body)
    json_error(response, 400)
    assert snapshot(app) == before
    assert client.get("/api/admin/guidelines").get_json()["rules"] == rules


def test_api_put_duplicate_ids_is_400(app, client, auth, admin):
    rules = client.get("/api/admin/guidelines").get_json()["rules"]
    before = snapshot(app)
    body = {"rules": [{"id": rules[0]["id"], "text": "one"}, {"id": rules[0]["id"], "text": "two"}]}
    assert "more than once" in put(client, auth, body).get_json()["error"]["message"]
    assert snapshot(app) == before


def test_api_put_fifty_rules_is_fine(app, client, auth, admin):
    response = put(client, auth, {"rules": [{"text": f"Rule {n}."} for n in range(50)]})
    assert response.status_code == 200
    assert count(app, Guideline) == 50
    response = post(client, auth, "/admin/guidelines", {"text": "One too many."})
    assert response.status_code == 400
    assert any("at most 50" in alert for alert in alerts(response))
    assert count(app, Guideline) == 50


def test_api_put_non_json_is_rejected(app, client, auth, admin):
    response = client.put(
        "/api/admin/guidelines",
        data="rules",
        headers={**auth.headers(), "Content-Type": "text/plain"},
    )
    json_error(response, 415)
    response = client.put(
        "/api/admin/guidelines",
        data="{not json",
        headers={**auth.headers(), "Content-Type": "application/json"},
    )
    json_error(response, 400)
