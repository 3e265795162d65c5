"""The colour theme: kept on the account, set from the top bar's toggle (fetch) or the
settings page (a form), shown on every page as <html data-theme>."""

from __future__ import annotations

import pytest

from app.accounts.models import User
from tests.web.helpers import database


def theme_of(app, user_id) -> str:
    with database(app).session() as session:
        return session.get(User, user_id).theme


def test_a_new_account_follows_the_system(app, client, auth, user):
    html = client.get("/settings").get_data(as_text=True)
    assert theme_of(app, user) == "system"
    assert "data-theme=" not in html.split("<head>")[0]
    assert 'id="theme-toggle"' in html and 'value="system" checked' in html


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_toggle_saves_a_choice_shown_on_every_page(app, client, auth, user, theme):
    response = client.post(
        "/settings/theme",
        data={"theme": theme},
        headers={**auth.headers(), "X-Requested-With": "fetch"},
    )
    assert response.status_code == 204
    assert theme_of(app, user) == theme
    for path in ("/settings", "/workspace/offers", "/chats/new"):
        html = client.get(path).get_data(as_text=True)
        assert f'<html lang="en" data-theme="{theme}">' in html


def test_the_settings_form_goes_back_to_the_page_it_came_from(app, client, auth, user):
    response = client.post(
        "/settings/theme",
        data={"theme": "dark", "csrf_token": auth.csrf},
        headers={"Referer": "http://localhost/workspace/offers"},
    )
    assert response.status_code == 303 and response.headers["Location"] == "/workspace/offers"
    response = client.post(
        "/settings/theme",
        data={"theme": "system", "csrf_token": auth.csrf},
        headers={"Referer": "https://elsewhere.example/phish"},
    )
    assert response.status_code == 303 and response.headers["Location"] == "/settings"
    assert theme_of(app, user) == "system"


def test_an_unknown_theme_is_refused_and_nothing_changes(app, client, auth, user):
    response = client.post(
        "/settings/theme",
        data={"theme": "neon"},
        headers={**auth.headers(), "Accept": "application/json"},
    )
    assert response.status_code == 400
    assert "system, light or dark" in response.get_data(as_text=True)
    assert theme_of(app, user) == "system"


def test_the_theme_needs_a_csrf_token_and_a_session(app, client, auth, user):
    assert client.post("/settings/theme", data={"theme": "dark"}).status_code == 400
    assert theme_of(app, user) == "system"
    auth.logout()
    response = client.post("/settings/theme", data={"theme": "dark"})
    assert response.status_code in (302, 400)
    assert theme_of(app, user) == "system"
