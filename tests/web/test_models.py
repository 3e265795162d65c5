"""The models people may pick: the command line, the JSON API (roles, bad input, 403 and
404), the admin page (with the model server's own list, or a quiet note when it cannot be
read) and the chat header's picker."""

from __future__ import annotations

import pytest

from tests.factories import add_user
from tests.fake_model import api_error, model_info
from tests.web.helpers import json_error

HTMX = {"HX-Request": "true"}
OPUS = {"name": "claude-opus-5", "label": "Opus", "credits": 7, "window": 100_000}


@pytest.fixture
def admin(auth):
    auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    return auth


def _models(client, headers) -> list[dict]:
    response = client.get("/api/models", headers=headers)
    assert response.status_code == 200
    return response.get_json()["models"]


# -- the command line ---------------------------------------------------------------------------


def test_the_command_line_lists_changes_and_refuses_clearly(runner):
    def run(*args):
        return runner.invoke(args=["models", *args])

    listed = run("list")
    assert listed.exit_code == 0
    assert listed.output.startswith("* claude-sonnet-5-5")  # the operator's, the default
    added = run("add", "claude-haiku-5-5", "--label", "Haiku", "--credits", "1")
    assert added.exit_code == 0 and "(the default)" in added.output  # the first listed
    assert (
        run("add", "claude-opus-5", "--label", "Opus", "--thinking-budget", "4096").exit_code == 0
    )
    assert run("default", "claude-opus-5").exit_code == 0
    lines = run("list").output.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["claude-haiku-5-5", "Haiku"],
        ["*", "claude-opus-5"],
    ]
    assert "thinking 4,096" in lines[1]

    for args, said in [
        (("add", "claude-opus-5", "--label", "Again"), "listed already"),
        (("add", "bad name", "--label", "X"), "A model's name"),
        (("add", "m", "--label", "X", "--window", "10"), "A window is 16,384"),
        (("add", "m", "--label", "X", "--thinking-budget", "512"), "thinking budget is 0"),
        (
            ("add", "m", "--label", "X", "--window", "16384", "--thinking-budget", "2048"),
            "not possible",
        ),
        (("add", "m", "--label", "X", "--credits", "-1"), "-1"),
        (("add", "m", "--label", "X", "--window", "lots"), "lots"),
        (("remove", "nothing"), "No model named 'nothing'"),
        (("default", "nothing"), "No model named 'nothing'"),
    ]:
        result = run(*args)
        assert result.exit_code != 0, args
        assert said in result.output, (args, result.output)
    assert run("remove", "claude-opus-5").exit_code == 0
    assert run("list").output.startswith("* claude-haiku-5-5")  # the default passed on


# -- the JSON API -------------------------------------------------------------------------------


def test_the_admin_lists_models_that_everyone_reads(app, client, admin):
    added = client.post("/api/admin/models", json=OPUS, headers=admin.headers())
    assert added.status_code == 201
    assert added.get_json() == {
        "name": "claude-opus-5",
        "label": "Opus",
        "credits": 7,
        "window": 100_000,
        "thinking_budget": 0,  # THINKING_BUDGET's
        "default": True,
    }
    second = {"name": "claude-haiku-5-5", "label": "Haiku"}
    assert client.post("/api/admin/models", json=second, headers=admin.headers()).status_code == 201
    changed = client.patch(
        "/api/admin/models/claude-haiku-5-5",
        json={"default": True, "thinking_budget": 2048, "label": "Haiku 5.5"},
        headers=admin.headers(),
    )
    assert changed.status_code == 200
    assert changed.get_json()["default"] and changed.get_json()["thinking_budget"] == 2048
    cleared = client.patch(
        "/api/admin/models/claude-opus-5", json={"window": None}, headers=admin.headers()
    )
    assert cleared.get_json()["window"] == 200_000  # back to CONTEXT_WINDOW_TOKENS

    add_user(app, "ada@example.com")
    admin.login("ada@example.com")
    models = _models(client, admin.headers())
    assert [(m["name"], m["label"], m["default"]) for m in models] == [
        ("claude-opus-5", "Opus", False),
        ("claude-haiku-5-5", "Haiku 5.5", True),
    ]
    for method, url in [
        ("POST", "/api/admin/models"),
        ("PATCH", "/api/admin/models/claude-opus-5"),
        ("DELETE", "/api/admin/models/claude-opus-5"),
    ]:
        response = client.open(url, method=method, json=OPUS, headers=admin.headers())
        assert response.status_code == 403, (method, url)
    assert len(_models(client, admin.headers())) == 2


def test_bad_input_is_refused_and_changes_nothing(client, admin):
    headers = admin.headers()
    assert client.post("/api/admin/models", json=OPUS, headers=headers).status_code == 201
    for body, status, code in [
        (OPUS, 409, "MODEL_REFUSED"),
        ({**OPUS, "name": "x\n"}, 400, "INVALID_FIELD"),
        ({**OPUS, "name": "two", "credits": -1}, 400, "INVALID_FIELD"),
        ({**OPUS, "name": "two", "window": 1_000}, 400, "INVALID_FIELD"),
        ({**OPUS, "name": "two", "window": "big"}, 400, "INVALID_FIELD"),
        ({**OPUS, "name": "two", "thinking_budget": 100}, 400, "MODEL_REFUSED"),
        ({**OPUS, "name": "two", "thinking_budget": 60_000}, 400, "MODEL_REFUSED"),
        ({"name": "two"}, 400, "INVALID_FIELD"),
    ]:
        response = client.post("/api/admin/models", json=body, headers=headers)
        assert json_error(response, status) == code, body
    refused = client.post(
        "/api/admin/models",
        json={**OPUS, "name": "two", "thinking_budget": 60_000},
        headers=headers,
    )
    assert refused.get_json()["error"]["field"] == "thinking_budget"
    assert "from 1,024 to 41,808" in refused.get_json()["error"]["message"]
    bad_patch = client.patch(
        "/api/admin/models/claude-opus-5", json={"thinking_budget": 512}, headers=headers
    )
    assert json_error(bad_patch, 400) == "MODEL_REFUSED"
    unknown = client.patch("/api/admin/models/nothing", json={}, headers=headers)
    assert json_error(unknown, 404) == "NOT_FOUND"
    assert json_error(client.delete("/api/admin/models/nothing", headers=headers), 404)
    assert [m["name"] for m in _models(client, headers)] == ["claude-opus-5"]
    assert _models(client, headers)[0]["thinking_budget"] == 0


def test_a_chat_picks_a_model_by_the_api(client, admin):
    client.post("/api/admin/models", json=OPUS, headers=admin.headers())
    chat_id = client.post("/api/chats", json={}, headers=admin.headers()).get_json()["id"]
    assert client.get("/api/chats", headers=admin.headers()).get_json()["chats"][0]["model"] is None
    unknown = client.patch(
        f"/api/chats/{chat_id}", json={"model": "gpt-9"}, headers=admin.headers()
    )
    assert json_error(unknown, 400) == "UNKNOWN_MODEL"
    assert unknown.get_json()["error"]["field"] == "model"
    # The operator's model is no choice once models are listed.
    operator = client.patch(
        f"/api/chats/{chat_id}",
        json={"model": "claude-sonnet-5-5", "title": "Kept?"},
        headers=admin.headers(),
    )
    assert json_error(operator, 400) == "UNKNOWN_MODEL"
    picked = client.patch(
        f"/api/chats/{chat_id}", json={"model": "claude-opus-5"}, headers=admin.headers()
    )
    assert picked.get_json()["model"] == "claude-opus-5"
    assert picked.get_json()["title"] == "New chat"  # the refused change wrote nothing
    back = client.patch(f"/api/chats/{chat_id}", json={"model": None}, headers=admin.headers())
    assert back.get_json()["model"] is None


def test_without_a_model_server_the_demo_model_is_a_choice(make_app):
    app = make_app(model_provider="demo")
    client = app.test_client()
    add_user(app, "root@example.com", admin=True)
    from tests.factories import AuthActions

    auth = AuthActions(app, client)
    auth.login("root@example.com")
    assert client.post("/api/admin/models", json=OPUS, headers=auth.headers()).status_code == 201
    models = _models(client, auth.headers())
    assert [(m["name"], m["label"], m["credits"]) for m in models] == [
        ("loopdesk-demo", "Demo model", 2),
        ("claude-opus-5", "Opus", 7),
    ]
    page = client.get("/admin/models/server").get_data(as_text=True)
    assert "No model server is configured" in page


# -- the admin page -----------------------------------------------------------------------------


def test_the_admin_page_adds_edits_and_removes(client, admin):
    page = client.get("/admin/models")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'aria-current="page">Models' in html and "claude-sonnet-5-5" in html
    form = {"csrf_token": admin.csrf, "name": "claude-opus-5", "label": "Opus", "credits": "3"}
    added = client.post("/admin/models", data=form, headers=HTMX)
    assert added.status_code == 201
    assert "Opus" in added.get_data(as_text=True) and 'id="models"' in added.get_data(as_text=True)
    usage = client.get("/admin/usage").get_data(as_text=True)
    assert "A reply costs 3 credits with claude-opus-5, plus" in usage  # the default
    again = client.post("/admin/models", data=form, headers=HTMX)
    assert again.status_code == 409 and "listed already" in again.get_data(as_text=True)
    bad = client.post(
        "/admin/models", data={**form, "name": "two", "credits": "many"}, headers=HTMX
    )
    assert bad.status_code == 400
    edit = {
        "csrf_token": admin.csrf,
        "label": "Opus 5",
        "credits": "",
        "window": "",
        "thinking_budget": "1",
    }
    refused = client.post("/admin/models/claude-opus-5/edit", data=edit, headers=HTMX)
    assert refused.status_code == 400 and "thinking budget" in refused.get_data(as_text=True)
    edited = client.post(
        "/admin/models/claude-opus-5/edit", data={**edit, "thinking_budget": "0"}, headers=HTMX
    )
    assert edited.status_code == 200 and "Opus 5" in edited.get_data(as_text=True)
    opus = _models(client, admin.headers())[0]
    assert (opus["label"], opus["credits"]) == ("Opus 5", 2)  # empty: the weight again
    token = {"csrf_token": admin.csrf}
    assert client.post("/admin/models/nothing/remove", data=token, headers=HTMX).status_code == 404
    removed = client.post("/admin/models/claude-opus-5/remove", data=token, headers=HTMX)
    assert removed.status_code == 200 and "Opus 5" not in removed.get_data(as_text=True)


def test_the_admin_page_offers_the_servers_models(make_app, fake_model):
    app = make_app(anthropic_base_url=fake_model.base_url)
    client = app.test_client()
    add_user(app, "root@example.com", admin=True)
    from tests.factories import AuthActions

    auth = AuthActions(app, client)
    auth.login("root@example.com")
    fake_model.models += [
        model_info(f"local-{n}", created_at="2025-01-01T00:00:00Z") for n in range(120)
    ]
    client.post("/api/admin/models", json=OPUS, headers=auth.headers())
    listing = client.get("/admin/models/server", headers=HTMX).get_data(as_text=True)
    assert '<option value="claude-haiku-5-5">Claude Haiku 5.5</option>' in listing
    assert 'value="local-119"' in listing  # the second page too
    assert 'value="claude-opus-5"' not in listing  # listed already
    assert len(fake_model.models_requests) == 2  # 100 a page
    fake_model.models_reply = api_error(500)
    assert "local-0" in client.get("/admin/models/server").get_data(as_text=True)  # kept a minute


def test_a_failing_listing_is_a_quiet_note(make_app, fake_model, monkeypatch):
    app = make_app(anthropic_base_url=fake_model.base_url)
    client = app.test_client()
    add_user(app, "root@example.com", admin=True)
    from tests.factories import AuthActions

    auth = AuthActions(app, client)
    auth.login("root@example.com")
    fake_model.models_reply = api_error(500)
    response = client.get("/admin/models/server", headers=HTMX)
    assert response.status_code == 200
    assert "could not be read just now" in response.get_data(as_text=True)
    assert len(fake_model.models_requests) == 1  # no retries
    # A slow one too, within the listing's timeout.
    from app.web import model_pages

    app.extensions.pop(model_pages.LISTING_KEPT)
    monkeypatch.setattr(model_pages, "LIST_TIMEOUT_SECONDS", 0.3)
    fake_model.models_reply, fake_model.models_delay = None, 5.0
    slow = client.get("/admin/models/server", headers=HTMX)
    assert "could not be read just now" in slow.get_data(as_text=True)


# -- the chat header's picker -------------------------------------------------------------------


def test_the_header_picker_chooses_the_chats_model(client, admin):
    chat_id = client.post("/api/chats", json={}, headers=admin.headers()).get_json()["id"]
    assert 'id="model-select"' not in client.get(f"/chats/{chat_id}").get_data(as_text=True)
    client.post("/api/admin/models", json=OPUS, headers=admin.headers())
    client.post(
        "/api/admin/models",
        json={"name": "claude-haiku-5-5", "label": "Haiku"},
        headers=admin.headers(),
    )
    page = client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert '<label for="model-select" class="model-label">Model</label>' in page
    assert '<option value="claude-opus-5" selected>Opus (default)</option>' in page
    swapped = client.patch(
        f"/chats/{chat_id}/model",
        data={"model": "claude-haiku-5-5"},
        headers={**HTMX, **admin.headers()},
    )
    assert swapped.status_code == 200
    assert '<option value="claude-haiku-5-5" selected>Haiku</option>' in swapped.get_data(
        as_text=True
    )
    # The gauge follows the pick at once: Opus's 100k window, then the operator's 200k.
    assert " of 100k</span>" in page
    assert 'id="context-gauge" class="context-gauge" hx-swap-oob="true"' in swapped.get_data(
        as_text=True
    )
    assert " of 200k</span>" in swapped.get_data(as_text=True)
    unknown = client.patch(
        f"/chats/{chat_id}/model", data={"model": "gpt-9"}, headers={**HTMX, **admin.headers()}
    )
    assert unknown.status_code == 400 and 'role="alert"' in unknown.get_data(as_text=True)
    plain = client.post(
        f"/chats/{chat_id}/model", data={"model": "claude-opus-5", "csrf_token": admin.csrf}
    )
    assert plain.status_code == 303
    assert (
        client.get("/api/chats", headers=admin.headers()).get_json()["chats"][0]["model"]
        == "claude-opus-5"
    )


def test_a_new_chat_starts_on_the_model_picked_in_its_header(client, admin):
    for body in (OPUS, {"name": "claude-haiku-5-5", "label": "Haiku"}):
        client.post("/api/admin/models", json=body, headers=admin.headers())
    page = client.get("/chats/new").get_data(as_text=True)
    assert '<select id="model-select" name="model" form="composer">' in page
    assert '<option value="claude-opus-5" selected>Opus (default)</option>' in page

    unknown = client.post(
        "/chats/start", data={"message": "Hi", "model": "gpt-9", "csrf_token": admin.csrf}
    )
    assert unknown.status_code == 400 and "gpt-9" in unknown.get_data(as_text=True)
    assert client.get("/api/chats", headers=admin.headers()).get_json()["chats"] == []

    started = client.post(
        "/chats/start",
        data={"message": "Hi", "model": "claude-haiku-5-5", "csrf_token": admin.csrf},
    )
    [made] = client.get("/api/chats", headers=admin.headers()).get_json()["chats"]
    assert (started.status_code, started.location) == (302, f"/chats/{made['id']}")
    assert made["model"] == "claude-haiku-5-5"
