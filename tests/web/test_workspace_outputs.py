"""Workspace pages for saved agent outputs and visual assets: list, filter, view, delete."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta

import pytest

from app.db import utcnow
from app.workspace.models import Output, VisualAsset
from tests.factories import add_conversation, add_offer
from tests.web.helpers import (
    anonymous_csrf,
    assert_redirects_to_login,
    count,
    database,
    redirect_path,
    snapshot,
)

QUIZ = {
    "title": "Which morning are you?",
    "intro": "Five questions.",
    "questions": [
        {
            "question": "When do you wake?",
            "options": [{"label": "Early", "scores": {"lark": 2}}, {"label": "Late"}],
        }
    ],
    "results": [{"profile_name": "Lark", "description": "Line one\nLine two"}],
}


def add_output(app, user_id, title="An output", *, agent="quiz", content=None, age=0, **values):
    with database(app).session() as session:
        output = Output(
            user_id=user_id,
            agent=agent,
            title=title,
            content=content if content is not None else {"title": title},
            created_at=utcnow() - timedelta(minutes=age),
            **values,
        )
        session.add(output)
        session.commit()
        return output.id


def add_asset(app, user_id, title="An image", *, age=0, **values):
    with database(app).session() as session:
        asset = VisualAsset(
            user_id=user_id, title=title, created_at=utcnow() - timedelta(minutes=age), **values
        )
        session.add(asset)
        session.commit()
        return asset.id


def page(response) -> str:
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return response.get_data(as_text=True)


def textarea(page_html: str, element_id: str) -> str:
    """The text a browser would hold in a textarea."""
    match = re.search(rf'<textarea id="{element_id}"[^>]*>(.*?)</textarea>', page_html, re.S)
    assert match, f"no textarea #{element_id}"
    return html.unescape(match.group(1))


@pytest.fixture
def bobs(app, bob):
    """Bob's saved output and asset."""
    return {
        "output": add_output(app, bob["id"], "Bob's quiz", offer_id=bob["offer"]),
        "asset": add_asset(app, bob["id"], "Bob's image", offer_id=bob["offer"]),
    }


# Outputs


def test_outputs_empty_state(client, user):
    body = page(client.get("/workspace/outputs"))
    assert "Ask Loopdesk in a chat to write a quiz or ad copy; results are saved here" in body
    assert 'href="/workspace/outputs" aria-current="page"' in body


def test_tabs_link_every_workspace_page(client, user):
    for path in ("/workspace/offers", "/workspace/personas"):
        body = page(client.get(path))
        for tab in ("offers", "personas", "outputs", "assets"):
            assert f'href="/workspace/{tab}"' in body


def test_outputs_list_only_yours_newest_first(app, client, user, bobs):
    offer = add_offer(app, user, "Calm Mornings")
    chat = add_conversation(app, user, "Quiz chat")
    add_output(app, user, "Older quiz", age=10)
    add_output(
        app, user, "Newer copy", agent="ad-copy", offer_id=offer, conversation_id=chat, age=1
    )
    body = page(client.get("/workspace/outputs"))
    assert "Bob&#39;s quiz" not in body
    assert body.index("Newer copy") < body.index("Older quiz")
    assert "Ad copy" in body  # the agent's display name, from the catalogue
    assert "For Calm Mornings" in body
    assert f'href="/chats/{chat}"' in body
    assert "Bob&#39;s Bakery" not in body  # not even in the offer filter


def test_outputs_filter_by_offer_and_agent(app, client, user):
    calm = add_offer(app, user, "Calm Mornings")
    bakery = add_offer(app, user, "Sourdough Club")
    add_output(app, user, "Calm quiz", offer_id=calm)
    add_output(app, user, "Calm ads", agent="ad-copy", offer_id=calm)
    add_output(app, user, "Bread quiz", offer_id=bakery)

    body = page(client.get(f"/workspace/outputs?offer={calm}"))
    assert "Calm quiz" in body and "Calm ads" in body and "Bread quiz" not in body
    assert f'<option value="{calm}" selected>' in body

    body = page(client.get(f"/workspace/outputs?offer={calm}&agent=quiz"))
    assert "Calm quiz" in body and "Calm ads" not in body and "Bread quiz" not in body

    body = page(client.get("/workspace/outputs?agent=ad-copy"))
    assert "Calm ads" in body and "Calm quiz" not in body

    body = page(client.get("/workspace/outputs?agent=landing-page"))
    assert "No outputs match these filters." in body

    # Unreadable filters are ignored rather than failing.
    body = page(client.get("/workspace/outputs?offer=abc"))
    assert "Calm quiz" in body and "Bread quiz" in body


def test_outputs_filter_by_someone_elses_offer_shows_nothing_of_theirs(
    app, client, user, bob, bobs
):
    add_output(app, user, "My quiz")
    body = page(client.get(f"/workspace/outputs?offer={bob['offer']}"))
    assert "Bob&#39;s quiz" not in body and "My quiz" not in body


def test_outputs_filter_with_htmx_returns_only_the_list(app, client, user):
    offer = add_offer(app, user, "Calm Mornings")
    add_output(app, user, "Calm quiz", offer_id=offer)
    add_output(app, user, "Other quiz")
    response = client.get(
        f"/workspace/outputs?offer={offer}",
        headers={"HX-Request": "true", "HX-Target": "output-list"},
    )
    body = page(response)
    assert body.lstrip().startswith('<div id="output-list">')
    assert "<html" not in body and "<nav" not in body
    assert "Calm quiz" in body and "Other quiz" not in body


def test_outputs_history_restore_gets_the_whole_page(app, client, user):
    add_output(app, user, "Calm quiz")
    response = client.get(
        "/workspace/outputs", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"}
    )
    assert "<html" in page(response)


def test_output_detail_renders_the_content_readably(app, client, user):
    offer = add_offer(app, user, "Calm Mornings")
    chat = add_conversation(app, user)
    output = add_output(
        app, user, QUIZ["title"], content=QUIZ, offer_id=offer, conversation_id=chat
    )
    body = page(client.get(f"/workspace/outputs/{output}"))
    assert "<h1" in body and "Which morning are you?" in body
    assert "<dt>questions</dt>" in body
    assert "<dt>profile name</dt>" in body
    assert "<li><dl><dt>question</dt><dd>When do you wake?</dd>" in body
    assert "For Calm Mornings" in body
    assert f'href="/chats/{chat}"' in body
    assert 'data-copy-target="output-text"' in body
    assert 'data-copy-target="output-json"' in body


def test_output_detail_has_plain_text_and_json_to_copy(app, client, user):
    output = add_output(app, user, QUIZ["title"], content=QUIZ)
    body = page(client.get(f"/workspace/outputs/{output}"))
    text = textarea(body, "output-text")
    assert text.startswith("Title: Which morning are you?\nIntro: Five questions.\n")
    assert "Questions:\n  1. Question: When do you wake?\n     Options:\n" in text
    assert "       1. Label: Early\n" in text
    assert "Profile name: Lark" in text
    assert "Description: Line one\n       Line two" in text
    assert "<" not in text
    assert json.loads(textarea(body, "output-json")) == QUIZ


def test_output_detail_escapes_content(app, client, user):
    evil = "<script>alert(1)</script>"
    output = add_output(
        app,
        user,
        f"Title {evil}",
        content={"headline": evil, "<b>key</b>": [evil], "hx": '<div hx-get="/x">'},
    )
    body = page(client.get(f"/workspace/outputs/{output}"))
    assert "<script>alert(1)" not in body
    assert "<b>key</b>" not in body
    assert '<div hx-get="/x">' not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    # The copy sources hold the original text once the browser decodes the entities.
    assert evil in textarea(body, "output-text")
    assert json.loads(textarea(body, "output-json"))["headline"] == evil
    listing = page(client.get("/workspace/outputs"))
    assert "<script>alert(1)" not in listing
    assert "Title &lt;script&gt;" in listing


def test_someone_elses_output_is_404(client, user, bobs):
    assert client.get(f"/workspace/outputs/{bobs['output']}").status_code == 404
    assert client.get("/workspace/outputs/999").status_code == 404


def test_delete_output(app, client, auth, user):
    output = add_output(app, user, "Doomed quiz")
    keep = add_output(app, user, "Kept quiz")
    response = client.post(f"/workspace/outputs/{output}/delete", data={"csrf_token": auth.csrf})
    assert redirect_path(response) == "/workspace/outputs"
    assert count(app, Output, Output.id == output) == 0
    assert count(app, Output, Output.id == keep) == 1
    body = page(client.get("/workspace/outputs"))
    assert "Deleted Doomed quiz." in body
    assert "Kept quiz" in body


def test_delete_output_from_the_list_with_htmx_removes_the_item(app, client, auth, user):
    output = add_output(app, user, "Doomed quiz")
    add_output(app, user, "Kept quiz")
    response = client.post(
        f"/workspace/outputs/{output}/delete",
        headers={
            **auth.headers(),
            "HX-Request": "true",
            "HX-Current-URL": "http://localhost/workspace/outputs?agent=quiz",
        },
    )
    assert response.status_code == 200
    assert response.get_data(as_text=True) == ""
    assert "HX-Redirect" not in response.headers
    assert count(app, Output, Output.id == output) == 0
    # No flash message is left over for the next page.
    assert "Deleted" not in page(client.get("/workspace/outputs"))


def test_delete_output_from_its_page_with_htmx_goes_to_the_list(app, client, auth, user):
    output = add_output(app, user, "Doomed quiz")
    add_output(app, user, "Kept quiz")
    response = client.post(
        f"/workspace/outputs/{output}/delete",
        headers={
            **auth.headers(),
            "HX-Request": "true",
            "HX-Current-URL": f"http://localhost/workspace/outputs/{output}",
        },
    )
    assert response.status_code == 200
    assert response.headers["HX-Redirect"] == "/workspace/outputs"
    assert count(app, Output) == 1


def test_delete_last_output_with_htmx_reloads_the_list_for_the_empty_state(app, client, auth, user):
    output = add_output(app, user, "Only quiz")
    response = client.post(
        f"/workspace/outputs/{output}/delete",
        headers={
            **auth.headers(),
            "HX-Request": "true",
            "HX-Current-URL": "http://localhost/workspace/outputs",
        },
    )
    assert response.headers["HX-Redirect"] == "/workspace/outputs"
    assert "results are saved here" in page(client.get("/workspace/outputs"))


def test_delete_someone_elses_output_is_404_and_deletes_nothing(app, client, auth, user, bobs):
    before = snapshot(app)
    response = client.post(
        f"/workspace/outputs/{bobs['output']}/delete", data={"csrf_token": auth.csrf}
    )
    assert response.status_code == 404
    assert snapshot(app) == before


def test_delete_output_without_csrf_token_is_400(app, client, user):
    output = add_output(app, user, "Kept quiz")
    before = snapshot(app)
    response = client.post(f"/workspace/outputs/{output}/delete")
    assert response.status_code == 400
    response = client.post(f"/workspace/outputs/{output}/delete", headers={"HX-Request": "true"})
    assert response.status_code == 400
    assert snapshot(app) == before


# Assets


def test_assets_empty_state(client, user):
    body = page(client.get("/workspace/assets"))
    assert "Ask Loopdesk in a chat to make an image" in body
    assert 'href="/workspace/assets" aria-current="page"' in body


def test_assets_gallery_only_yours(app, client, user, bobs):
    offer = add_offer(app, user, "Calm Mornings")
    draft = add_asset(
        app,
        user,
        "Sunrise hero",
        offer_id=offer,
        preset="Editorial photo",
        meta={"draft": True, "colors": ["#112233"]},
    )
    final = add_asset(app, user, "Final hero", data=b"\x89PNG", age=5, preset="Flat illustration")
    # The demo seed's hero image is a placeholder, marked so.
    add_asset(app, user, "Seeded hero", preset="Editorial photo", age=9, meta={"placeholder": True})
    body = page(client.get("/workspace/assets"))
    assert "Bob&#39;s image" not in body
    assert f'src="/workspace/assets/{draft}"' in body
    assert f'href="/workspace/assets/{draft}/view"' in body
    assert f'src="/workspace/assets/{final}"' in body
    assert body.index("Sunrise hero") < body.index("Final hero")
    assert "For Calm Mornings" in body and "Flat illustration" in body
    # Draft renders say so, never the look of a preset they do not have.
    assert "Editorial photo" not in body
    assert body.count("Draft render</span>") == 2


def test_assets_filter_by_offer(app, client, user):
    calm = add_offer(app, user, "Calm Mornings")
    bakery = add_offer(app, user, "Sourdough Club")
    add_asset(app, user, "Sunrise hero", offer_id=calm)
    add_asset(app, user, "Loaf hero", offer_id=bakery)
    body = page(client.get(f"/workspace/assets?offer={bakery}"))
    assert "Loaf hero" in body and "Sunrise hero" not in body
    response = client.get(
        f"/workspace/assets?offer={calm}",
        headers={"HX-Request": "true", "HX-Target": "asset-list"},
    )
    body = page(response)
    assert body.lstrip().startswith('<div id="asset-list">')
    assert "Sunrise hero" in body and "Loaf hero" not in body


def test_asset_page(app, client, user):
    offer = add_offer(app, user, "Calm Mornings")
    asset = add_asset(
        app,
        user,
        "Sunrise hero",
        offer_id=offer,
        prompt="A <b>calm</b> sunrise",
        preset="Editorial photo",
        meta={"draft": True},
    )
    body = page(client.get(f"/workspace/assets/{asset}/view"))
    assert f'src="/workspace/assets/{asset}"' in body
    assert "A &lt;b&gt;calm&lt;/b&gt; sunrise" in body
    assert 'Editorial photo <span class="muted">(asked for; a draft render' in body
    assert "Calm Mornings" in body and "Draft render" in body
    # The image route still serves it.
    assert client.get(f"/workspace/assets/{asset}").headers["Content-Type"] == "image/png"


def test_someone_elses_asset_is_404(client, user, bobs):
    assert client.get(f"/workspace/assets/{bobs['asset']}/view").status_code == 404
    assert client.get(f"/workspace/assets/{bobs['asset']}").status_code == 404


def test_delete_asset(app, client, auth, user):
    asset = add_asset(app, user, "Doomed image")
    response = client.post(f"/workspace/assets/{asset}/delete", data={"csrf_token": auth.csrf})
    assert redirect_path(response) == "/workspace/assets"
    assert count(app, VisualAsset) == 0
    assert "Deleted Doomed image." in page(client.get("/workspace/assets"))


def test_delete_asset_from_the_gallery_with_htmx(app, client, auth, user):
    asset = add_asset(app, user, "Doomed image")
    add_asset(app, user, "Kept image")
    response = client.post(
        f"/workspace/assets/{asset}/delete",
        headers={
            **auth.headers(),
            "HX-Request": "true",
            "HX-Current-URL": "http://localhost/workspace/assets",
        },
    )
    assert response.status_code == 200 and response.get_data(as_text=True) == ""
    assert "HX-Redirect" not in response.headers
    assert count(app, VisualAsset) == 1


def test_delete_someone_elses_asset_is_404_and_deletes_nothing(app, client, auth, user, bobs):
    before = snapshot(app)
    response = client.post(
        f"/workspace/assets/{bobs['asset']}/delete", data={"csrf_token": auth.csrf}
    )
    assert response.status_code == 404
    assert snapshot(app) == before


def test_delete_asset_without_csrf_token_is_400(app, client, user):
    asset = add_asset(app, user, "Kept image")
    before = snapshot(app)
    assert client.post(f"/workspace/assets/{asset}/delete").status_code == 400
    assert snapshot(app) == before


# Logged out


@pytest.mark.parametrize(
    "path",
    ["/workspace/outputs", "/workspace/outputs/1", "/workspace/assets", "/workspace/assets/1/view"],
)
def test_pages_redirect_to_login_when_logged_out(client, bobs, path):
    assert_redirects_to_login(client.get(path), next_path=path)


@pytest.mark.parametrize("path", ["/workspace/outputs/1/delete", "/workspace/assets/1/delete"])
def test_deletes_redirect_to_login_when_logged_out(app, client, bobs, path):
    before = snapshot(app)
    response = client.post(path, data={"csrf_token": anonymous_csrf(client)})
    assert_redirects_to_login(response, next_path=path)
    assert snapshot(app) == before
