"""Presets on the pages: a person's own in Settings (add, edit, delete in place, refusals
shown in the form), everyone's on Admin → Presets, and a chat started from one (the
new-chat page, the sidebar, the header, the starters that fill the composer)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.chat.models import Conversation
from app.chat.preset_models import Preset
from tests.factories import add_user

HTMX = {"HX-Request": "true"}


@pytest.fixture
def ada(auth):
    user_id = auth.create()
    auth.login()
    return user_id


def _headers(auth) -> dict:
    return {**auth.headers(), **HTMX}


def _presets(app) -> list[tuple[str, int | None]]:
    with app.extensions["database"].session() as session:
        return [(p.name, p.user_id) for p in session.scalars(select(Preset).order_by(Preset.id))]


def _form(**fields) -> dict:
    return {"name": "Launch", "instructions": "Be brief.", "model": "", "starters": "", **fields}


def test_a_person_adds_edits_and_deletes_a_preset_in_place(app, client, auth, ada):
    page = client.get("/settings").get_data(as_text=True)
    assert 'id="presets-heading"' in page and "No presets yet." in page

    data = _form(tool_groups=["writing", "workspace"], starters="Plan a launch\n\nWrite a teaser")
    added = client.post("/settings/presets", data=data, headers=_headers(auth))
    assert added.status_code == 201
    html = added.get_data(as_text=True)
    assert html.startswith('<div id="presets"') and "Launch" in html
    assert "Offers and personas, Writing agents" in html and "2 starters" in html
    [(name, owner)] = _presets(app)
    assert (name, owner) == ("Launch", ada)
    with app.extensions["database"].session() as session:
        preset = session.scalars(select(Preset)).one()
        assert preset.starters == ["Plan a launch", "Write a teaser"]
        preset_id = preset.id

    edit = client.get(f"/settings/presets/{preset_id}/edit", headers=HTMX).get_data(as_text=True)
    assert f'id="preset-form-{preset_id}"' in edit and "Plan a launch\nWrite a teaser" in edit
    # The model is one of those people may pick: here only the default, the operator's.
    model = edit[edit.index(f'<select id="preset-{preset_id}-model"') :]
    model = model[: model.index("</select>")]
    assert model.count("<option") == 2 and '<option value="" selected>The default (' in model
    refused = client.post(
        f"/settings/presets/{preset_id}", data=_form(name=" "), headers=_headers(auth)
    )
    assert refused.status_code == 400
    assert "A preset needs a name." in refused.get_data(as_text=True)
    assert _presets(app) == [("Launch", ada)]  # nothing changed

    saved = client.post(
        f"/settings/presets/{preset_id}", data=_form(name="Launch week"), headers=_headers(auth)
    )
    assert saved.status_code == 200 and "Launch week" in saved.get_data(as_text=True)
    assert "only questions" in saved.get_data(as_text=True)  # no group ticked: none on

    # Without htmx, a change goes back to the settings page.
    gone = client.post(f"/settings/presets/{preset_id}/delete", headers=auth.headers())
    assert gone.status_code == 303 and gone.headers["Location"].endswith("#presets-heading")
    assert _presets(app) == []


def test_someone_elses_preset_is_missing_and_a_shared_one_read_only(app, client, auth, ada):
    bob = add_user(app, "bob@example.com")
    with app.extensions["database"].session() as session:
        session.add_all([Preset(user_id=bob, name="Bob's"), Preset(user_id=None, name="Team")])
        session.commit()
        bobs, team = (
            session.scalar(select(Preset.id).where(Preset.name == name))
            for name in ("Bob's", "Team")
        )
    for preset_id in (bobs, team):
        assert client.get(f"/settings/presets/{preset_id}/edit").status_code == 404
        answer = client.post(f"/settings/presets/{preset_id}/delete", headers=_headers(auth))
        assert answer.status_code == 404
    page = client.get("/settings").get_data(as_text=True)
    assert "Bob&#39;s" not in page and "Team" in page and "For everyone" in page
    assert f"/settings/presets/{team}/edit" not in page
    assert client.get("/admin/presets").status_code == 403


def test_an_admin_keeps_the_presets_for_everyone(app, client, auth):
    auth.create("admin@example.com", admin=True)
    auth.login("admin@example.com")
    page = client.get("/admin/presets").get_data(as_text=True)
    assert 'aria-current="page">Presets</a>' in page
    added = client.post("/admin/presets", data=_form(name="Team"), headers=_headers(auth))
    assert added.status_code == 201
    assert _presets(app) == [("Team", None)]
    again = client.post("/admin/presets", data=_form(name="Team"), headers=_headers(auth))
    assert again.status_code == 400
    assert "There is a preset named &#39;Team&#39; already." in again.get_data(as_text=True)


def test_a_chat_starts_from_a_preset_and_shows_it(app, client, auth, ada):
    with app.extensions["database"].session() as session:
        preset = Preset(user_id=ada, name="Blog", starters=["Draft a post", "Outline <b>it</b>"])
        session.add(preset)
        session.commit()
        preset_id = preset.id

    sidebar = client.get("/chats/new").get_data(as_text=True)
    assert f'href="/chats/new?preset={preset_id}"' in sidebar  # sidebar and the picker
    draft = client.get(f"/chats/new?preset={preset_id}").get_data(as_text=True)
    assert re.search(
        r'id="chat-preset"[^>]*><span class="visually-hidden">Preset: </span>Blog', draft
    )
    assert 'data-fill-composer="Draft a post"' in draft
    assert 'data-fill-composer="Outline &lt;b&gt;it&lt;/b&gt;"' in draft
    assert f'name="preset_id" value="{preset_id}"' in draft
    assert client.get("/chats/new?preset=999999").status_code == 404

    started = client.post(
        "/chats/start",
        data={"message": "Hello", "preset_id": str(preset_id), "csrf_token": auth.csrf},
    )
    assert started.status_code == 302
    with app.extensions["database"].session() as session:
        chat = session.scalars(select(Conversation)).one()
        assert chat.preset_id == preset_id
    page = client.get(f"/chats/{chat.id}").get_data(as_text=True)
    assert 'id="chat-preset"' in page and ">Blog</span>" in page
