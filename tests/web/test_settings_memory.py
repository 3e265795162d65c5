"""The settings page's memory sections (instructions, facts, import, history), the admin's
view of someone's memory, and changing the password. Every write goes through
app.memory.store and is recorded with its source and actor."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from app.memory.models import MemoryChange
from app.memory.store import MAX_FACTS, MAX_INSTRUCTIONS_CHARS, Operation, apply_operations
from tests.factories import PASSWORD, AuthActions, add_user, csrf_token_from
from tests.fake_model import Turn, api_error, text
from tests.web.helpers import alerts, database, redirect_path, snapshot

HTMX = {"HX-Request": "true"}


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model


@pytest.fixture
def ada(auth):
    user_id = auth.create()
    auth.login()
    return user_id


def post(client, auth, path, data, htmx=True):
    headers = {**(HTMX if htmx else {}), **auth.headers()}
    return client.post(path, data=data, headers=headers)


def memory_of(app, user_id) -> tuple[str, list[str]]:
    from app.memory.store import read_memory

    with database(app).session() as session:
        return read_memory(session, user_id)


def changes_of(app, user_id) -> list[tuple]:
    with database(app).session() as session:
        return [
            (c.action, c.fact, c.replaced_by, c.source, c.actor_id)
            for c in session.scalars(
                select(MemoryChange)
                .where(MemoryChange.user_id == user_id)
                .order_by(MemoryChange.id)
            )
        ]


def give(app, user_id, *facts, instructions=None, source="api"):
    with database(app).session() as session:
        operations = [Operation("add", fact) for fact in facts]
        apply_operations(session, user_id, operations, source=source, instructions=instructions)
        session.commit()


def fact_texts(html: str) -> list[str]:
    return re.findall(r'<span class="fact-text">([^<]*)</span>', html)


def test_the_hub_has_every_section(client, ada):
    html = client.get("/settings").get_data(as_text=True)
    for section in ("instructions", "facts", "memory-import", "memory-history", "tokens"):
        assert f'id="{section}"' in html
    assert 'id="account"' in html
    assert f"0 / {MAX_INSTRUCTIONS_CHARS:,} characters" in html
    assert "Nothing remembered yet." in html and "No changes yet." in html


# -- personal instructions -------------------------------------------------------------------


def test_saving_instructions_returns_the_section_and_the_history(app, client, auth, ada):
    response = post(
        client, auth, "/settings/instructions", {"instructions": "Write in British English."}
    )
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith('<form id="instructions"')
    assert "Saved." in html
    assert '<div id="memory-history" hx-swap-oob="true">' in html
    assert "instructions rewritten" in html
    assert memory_of(app, ada) == ("Write in British English.", [])
    assert changes_of(app, ada) == [
        ("instructions", "Write in British English.", None, "settings", ada)
    ]
    page = client.get("/settings").get_data(as_text=True)
    assert "Write in British English.</textarea>" in page


def test_instructions_at_the_cap_count_browser_line_breaks_once(app, client, auth, ada):
    # A browser sends each line break in a textarea as CRLF: 4,000 characters as typed.
    typed = ("x" * 99 + "\n") * (MAX_INSTRUCTIONS_CHARS // 100)
    assert len(typed) == MAX_INSTRUCTIONS_CHARS
    response = post(
        client, auth, "/settings/instructions", {"instructions": typed.replace("\n", "\r\n")}
    )
    assert response.status_code == 200, alerts(response)
    assert memory_of(app, ada)[0] == typed


def test_instructions_over_the_cap_are_refused_and_nothing_is_saved(app, client, auth, ada):
    give(app, ada, instructions="Keep it short.")
    before = snapshot(app)
    too_long = "y" * (MAX_INSTRUCTIONS_CHARS + 1)
    response = post(client, auth, "/settings/instructions", {"instructions": too_long})
    assert response.status_code == 400
    assert alerts(response) == [
        f"Personal instructions can be at most {MAX_INSTRUCTIONS_CHARS} characters."
    ]
    html = response.get_data(as_text=True)
    assert too_long in html  # the person's text is kept in the form, not lost
    assert "hx-swap-oob" not in html
    assert snapshot(app) == before
    # Without htmx: the whole page with the error, still nothing saved.
    response = post(client, auth, "/settings/instructions", {"instructions": too_long}, False)
    assert response.status_code == 400
    assert "<h1>Settings</h1>" in response.get_data(as_text=True)
    assert snapshot(app) == before


def test_a_plain_form_post_goes_back_to_the_page(app, client, auth, ada):
    response = post(client, auth, "/settings/instructions", {"instructions": "Be brief."}, False)
    assert redirect_path(response) == "/settings"
    assert memory_of(app, ada)[0] == "Be brief."


def test_clearing_instructions_is_recorded(app, client, auth, ada):
    give(app, ada, instructions="Be brief.")
    assert post(client, auth, "/settings/instructions", {"instructions": ""}).status_code == 200
    assert memory_of(app, ada)[0] == ""
    assert changes_of(app, ada)[-1][:4] == ("instructions", "", None, "settings")


# -- facts -------------------------------------------------------------------------------------


def test_add_edit_and_forget_facts(app, client, auth, ada):
    response = post(client, auth, "/settings/facts", {"fact": "  Runs a bakery in Leeds. "})
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith('<div id="facts"')
    assert fact_texts(html) == ["Runs a bakery in Leeds."]
    assert '<div id="memory-history" hx-swap-oob="true">' in html
    post(client, auth, "/settings/facts", {"fact": "Prefers short headlines."})
    # A near duplicate is merged: no change.
    post(client, auth, "/settings/facts", {"fact": "prefers short  headlines"})
    assert memory_of(app, ada)[1] == ["Runs a bakery in Leeds.", "Prefers short headlines."]

    response = post(
        client,
        auth,
        "/settings/facts/edit",
        {"fact": "Runs a bakery in Leeds.", "new_fact": "Runs a bakery in York."},
    )
    assert response.status_code == 200
    assert fact_texts(response.get_data(as_text=True)) == [
        "Runs a bakery in York.",
        "Prefers short headlines.",
    ]
    response = post(client, auth, "/settings/facts/forget", {"fact": "Prefers short headlines."})
    assert response.status_code == 200
    assert fact_texts(response.get_data(as_text=True)) == ["Runs a bakery in York."]
    assert memory_of(app, ada)[1] == ["Runs a bakery in York."]
    assert changes_of(app, ada) == [
        ("added", "Runs a bakery in Leeds.", None, "settings", ada),
        ("added", "Prefers short headlines.", None, "settings", ada),
        ("superseded", "Runs a bakery in Leeds.", "Runs a bakery in York.", "settings", ada),
        ("forgotten", "Prefers short headlines.", None, "settings", ada),
    ]


@pytest.mark.parametrize("fact", ["", "   ", "z" * 281], ids=["empty", "blank", "too-long"])
def test_a_bad_fact_is_refused(app, client, auth, ada, fact):
    before = snapshot(app)
    response = post(client, auth, "/settings/facts", {"fact": fact})
    assert response.status_code == 400
    assert alerts(response)
    assert snapshot(app) == before


def test_an_edit_to_nothing_or_too_long_is_refused(app, client, auth, ada):
    give(app, ada, "Runs a bakery.")
    before = snapshot(app)
    for new in ("", "q" * 281):
        response = post(
            client, auth, "/settings/facts/edit", {"fact": "Runs a bakery.", "new_fact": new}
        )
        assert response.status_code == 400
        html = response.get_data(as_text=True)
        assert '<details class="fact-edit" open>' in html
        assert alerts(response)
    assert snapshot(app) == before


def test_the_fact_cap_is_enforced(app, client, auth, ada):
    give(app, ada, *[f"Fact number {n} about the person." for n in range(MAX_FACTS)])
    before = snapshot(app)
    response = post(client, auth, "/settings/facts", {"fact": "One fact too many."})
    assert response.status_code == 400
    assert any("the limit is 50" in alert for alert in alerts(response))
    assert snapshot(app) == before


# -- import ------------------------------------------------------------------------------------


def _ops(*operations):
    return Turn(text(json.dumps({"operations": list(operations)})))


def test_import_goes_through_reconcile(app, client, auth, ada, fake_model):
    give(app, ada, "Runs a coffee roastery.")
    fake_model.script(
        _ops(
            {
                "op": "replace",
                "fact": "Runs a coffee roastery.",
                "new_fact": "Runs a tea shop.",
                "reason": "changed business",
            },
            {"op": "add", "fact": "Sells online in the UK.", "reason": "stated"},
        )
    )
    pasted = "I sold the roastery; now I run a tea shop.\nWe sell online in the UK."
    response = post(client, auth, "/settings/import", {"text": pasted})
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert html.lstrip().startswith('<form id="memory-import"')
    assert "Done: 2 changes to your memory." in html
    assert '<div id="facts" hx-swap-oob="true">' in html
    assert '<div id="memory-history" hx-swap-oob="true">' in html
    assert memory_of(app, ada)[1] == ["Runs a tea shop.", "Sells online in the UK."]
    request = fake_model.requests[-1]
    assert request["model"] == app.config["LOOPDESK"].fast_model
    assert pasted in request["messages"][0]["content"]
    assert changes_of(app, ada)[1:] == [
        ("superseded", "Runs a coffee roastery.", "Runs a tea shop.", "import", ada),
        ("added", "Sells online in the UK.", None, "import", ada),
    ]


@pytest.mark.parametrize(
    "failure",
    [api_error(500, "api_error"), Turn(text("Happy to help!"))],
    ids=["http-error", "not-json"],
)
def test_import_falls_back_to_rules_when_the_model_fails(
    app, client, auth, ada, fake_model, failure
):
    fake_model.responder = lambda body: failure
    response = post(
        client, auth, "/settings/import", {"text": "I run a bakery.\nMy brand colour is green."}
    )
    assert response.status_code == 200
    assert "saved line by line" in response.get_data(as_text=True)
    assert memory_of(app, ada)[1] == ["I run a bakery.", "My brand colour is green."]
    assert {change[3] for change in changes_of(app, ada)} == {"import"}


def test_import_of_nothing_or_over_the_cap_saves_nothing(app, client, auth, ada, fake_model):
    give(app, ada, *[f"Fact number {n} about the person." for n in range(MAX_FACTS)])
    before = snapshot(app)
    assert post(client, auth, "/settings/import", {"text": "  "}).status_code == 400
    fake_model.script(_ops({"op": "add", "fact": "One fact too many."}))
    response = post(client, auth, "/settings/import", {"text": "I also surf."})
    assert response.status_code == 400
    assert any("the limit is 50" in alert for alert in alerts(response))
    assert "I also surf." in response.get_data(as_text=True)  # the text stays in the form
    assert snapshot(app) == before


def test_import_form_shows_an_indicator_and_disables_its_button(client, ada):
    html = client.get("/settings").get_data(as_text=True)
    form = re.search(r'<form id="memory-import"[^>]*>', html).group(0)
    assert 'hx-indicator="#import-indicator"' in form
    assert 'hx-disabled-elt="find button"' in form
    assert 'id="import-indicator" class="htmx-indicator' in html


# -- history -----------------------------------------------------------------------------------


def test_history_shows_the_last_fifty_newest_first(app, client, auth, ada):
    with database(app).session() as session:
        for n in range(30):
            apply_operations(session, ada, [Operation("add", f"Fact {n}.")], source="api")
            session.commit()
        for n in range(30):
            apply_operations(
                session, ada, [Operation("forget", f"Fact {n}.", reason="old")], source="tool"
            )
            session.commit()
    # The newest change: the instructions.
    give(app, ada, instructions="Answer in French.", source="api")
    html = client.get("/settings").get_data(as_text=True)
    rows = re.findall(
        r'<tr id="memory-change-(\d+)" class="memory-change" data-action="(\w+)"', html
    )
    assert len(rows) == 50
    ids = [int(row_id) for row_id, _ in rows]
    assert ids == sorted(ids, reverse=True)
    assert rows[0][1] == "instructions" and rows[1][1] == "forgotten"
    assert "Answer in French." in html
    partial = client.get("/settings/history").get_data(as_text=True)
    assert partial.lstrip().startswith('<div id="memory-history">')


def test_someone_elses_memory_is_unreachable(app, client, auth, ada):
    bob = add_user(app, "bob@example.com")
    give(app, bob, "Bob's secret project is Falcon.", instructions="Bob's private rules.")
    html = client.get("/settings").get_data(as_text=True)
    assert "Falcon" not in html and "Bob&#39;s private rules" not in html
    # A post names facts, never a person: it can only ever reach your own memory.
    post(client, auth, "/settings/facts/forget", {"fact": "Bob's secret project is Falcon."})
    post(
        client,
        auth,
        "/settings/facts/edit",
        {"fact": "Bob's secret project is Falcon.", "new_fact": "Hijacked."},
    )
    assert memory_of(app, bob) == ("Bob's private rules.", ["Bob's secret project is Falcon."])
    assert memory_of(app, ada)[1] == ["Hijacked."]  # an edit of an unknown fact adds it
    before = snapshot(app)
    assert client.get(f"/admin/users/{bob}/memory").status_code == 403
    for path in ("instructions", "facts", "facts/forget", "facts/edit"):
        response = post(
            client,
            auth,
            f"/admin/users/{bob}/memory/{path}",
            {"instructions": "x", "fact": "Bob's secret project is Falcon.", "new_fact": "x"},
        )
        assert response.status_code == 403
    assert snapshot(app) == before


# -- the admin's view --------------------------------------------------------------------------


def test_admin_edits_someones_memory_recorded_as_admin(app, client, auth):
    ada = add_user(app, "ada@example.com")
    give(app, ada, "Runs a bakery.")
    admin = auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    people = client.get("/admin/users").get_data(as_text=True)
    assert f'href="/admin/users/{ada}/memory"' in people

    page = client.get(f"/admin/users/{ada}/memory")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "Memory of ada@example.com" in html
    assert fact_texts(html) == ["Runs a bakery."]
    assert f'hx-post="/admin/users/{ada}/memory/facts"' in html
    assert 'id="memory-import"' not in html

    base = f"/admin/users/{ada}/memory"
    assert post(client, auth, f"{base}/instructions", {"instructions": "Be kind."}).status_code == (
        200
    )
    assert post(client, auth, f"{base}/facts", {"fact": "Sells sourdough."}).status_code == 200
    response = post(
        client,
        auth,
        f"{base}/facts/edit",
        {"fact": "Runs a bakery.", "new_fact": "Runs two bakeries."},
    )
    assert response.status_code == 200
    assert f'hx-post="{base}/facts/edit"' in response.get_data(as_text=True)
    assert post(client, auth, f"{base}/facts/forget", {"fact": "Sells sourdough."}).status_code == (
        200
    )
    assert memory_of(app, ada) == ("Be kind.", ["Runs two bakeries."])
    assert memory_of(app, admin) == ("", [])
    assert changes_of(app, ada)[1:] == [
        ("instructions", "Be kind.", None, "admin", admin),
        ("added", "Sells sourdough.", None, "admin", admin),
        ("superseded", "Runs a bakery.", "Runs two bakeries.", "admin", admin),
        ("forgotten", "Sells sourdough.", None, "admin", admin),
    ]
    history = client.get(f"/admin/users/{ada}/memory").get_data(as_text=True)
    assert "admin (root@example.com)" in history

    # Over the cap: refused, nothing saved.
    before = snapshot(app)
    response = post(
        client, auth, f"{base}/instructions", {"instructions": "x" * (MAX_INSTRUCTIONS_CHARS + 1)}
    )
    assert response.status_code == 400
    assert snapshot(app) == before

    # What ada sees in her own settings: the admin's changes, named as such.
    client.post("/logout", data={"csrf_token": auth.csrf})
    auth.login("ada@example.com")
    own = client.get("/settings").get_data(as_text=True)
    assert "Runs two bakeries." in own and 'data-source="admin"' in own


def test_admin_memory_of_an_unknown_person_is_404(client, auth):
    auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    assert client.get("/admin/users/999/memory").status_code == 404
    response = post(client, auth, "/admin/users/999/memory/facts", {"fact": "x"})
    assert response.status_code == 404


def test_admin_memory_needs_a_login(app, client):
    ada = add_user(app, "ada@example.com")
    response = client.get(f"/admin/users/{ada}/memory")
    assert redirect_path(response) == "/login"


# -- password ----------------------------------------------------------------------------------


def _login_status(app, email, password) -> int:
    fresh = app.test_client()
    token = csrf_token_from(fresh.get("/login").get_data(as_text=True))
    response = fresh.post(
        "/login", data={"email": email, "password": password, "csrf_token": token}
    )
    return response.status_code


def test_password_change(app, client, auth, ada):
    new = "a brand new password"
    wrong = post(
        client,
        auth,
        "/settings/password",
        {"current_password": "not my password", "new_password": new, "confirm": new},
    )
    assert wrong.status_code == 400
    assert alerts(wrong) == ["That is not your current password."]
    assert wrong.get_data(as_text=True).lstrip().startswith('<form id="account"')
    mismatch = post(
        client,
        auth,
        "/settings/password",
        {"current_password": PASSWORD, "new_password": new, "confirm": new + "!"},
    )
    assert mismatch.status_code == 400
    assert alerts(mismatch) == ["Passwords differ."]
    short = post(
        client,
        auth,
        "/settings/password",
        {"current_password": PASSWORD, "new_password": "short", "confirm": "short"},
    )
    assert short.status_code == 400
    assert _login_status(app, "ada@example.com", PASSWORD) == 302

    done = post(
        client,
        auth,
        "/settings/password",
        {"current_password": PASSWORD, "new_password": new, "confirm": new},
    )
    assert done.status_code == 200
    html = done.get_data(as_text=True)
    assert "Password changed." in html and new not in html
    assert _login_status(app, "ada@example.com", PASSWORD) == 400
    assert _login_status(app, "ada@example.com", new) == 302
    with database(app).session() as session:
        from app.accounts.models import User

        stored = session.get(User, ada).password_hash
    assert stored.startswith("$argon2") and new not in stored


def test_the_demo_model_imports_memory_itself_and_never_says_it_was_unavailable(make_app):
    """With no model configured, the built-in demo answers the reconcile call (through the
    real SDK path): each new line is kept, what is held is not added twice."""
    app = make_app(model_provider="demo")
    client = app.test_client()
    auth = AuthActions(app, client)
    ada = auth.create()
    auth.login()
    give(app, ada, "Runs a coffee roastery.")
    pasted = "Runs a coffee roastery.\n- Sells online in the UK.\nPrefers a warm tone."
    response = post(client, auth, "/settings/import", {"text": pasted})
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert "unavailable" not in html and "Done: 2 changes to your memory." in html
    assert memory_of(app, ada)[1] == [
        "Runs a coffee roastery.",
        "Sells online in the UK.",
        "Prefers a warm tone.",
    ]
