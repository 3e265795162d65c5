"""The workspace over JSON: the verbs the page allows, the page's own validation messages
with the field named, cursor pages, 404 for what is not yours, and deleting an offer or a
persona from the page and the API (what referred to it stays)."""

from __future__ import annotations

import pytest

from app.workspace.models import Campaign, Character, Output, Persona, VisualAsset
from tests.factories import add_offer, add_persona
from tests.web.helpers import bearer, database


def _add(app, item):
    with database(app).session() as session:
        session.add(item)
        session.commit()
        return item.id


def test_offers_four_verbs(client, user, auth):
    headers = auth.headers()
    created = client.post(
        "/api/offers",
        json={"name": "  Sourdough club ", "price": "€9", "brand_colors": ["#aa0000", "#00aa00"]},
        headers=headers,
    )
    assert created.status_code == 201, created.get_json()
    offer = created.get_json()
    assert offer["name"] == "Sourdough club" and offer["brand_colors"] == ["#aa0000", "#00aa00"]
    assert offer["created_at"].endswith("Z")

    url = f"/api/offers/{offer['id']}"
    assert client.get(url).get_json() == offer
    changed = client.patch(url, json={"audience": "Busy parents"}, headers=headers)
    assert changed.status_code == 200
    assert changed.get_json()["audience"] == "Busy parents"
    assert changed.get_json()["brand_colors"] == ["#aa0000", "#00aa00"]  # left as it was
    assert client.get("/api/offers").get_json()["items"][0]["audience"] == "Busy parents"

    assert client.delete(url, headers=headers).status_code == 204
    assert client.get(url).status_code == 404


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({}, "name", "This field is required"),
        ({"name": "   "}, "name", "This field is required"),
        ({"name": "x" * 121}, "name", "120"),
        # Blank but longer than allowed: refused as sent (a blank value used to end the
        # checks before its length was read; the OpenAPI fuzzer found it with U+0085).
        ({"name": "A", "audience": " " * 2001}, "audience", "2000"),
        ({"name": "A", "price": "\u0085" * 61}, "price", "60"),
        ({"name": "A", "brand_colors": ["teal"]}, "brand_colors", "colours like #1f6feb"),
        ({"name": "A", "brand_colors": "#aa0000"}, "brand_colors", "list of at most 20"),
        # As the document says: whole colours (no padding, no comma lists), at most 20.
        ({"name": "A", "brand_colors": [" #aa0000"]}, "brand_colors", "colours like"),
        ({"name": "A", "brand_colors": ["#aa0000,#bb0000"]}, "brand_colors", "colours like"),
        ({"name": "A", "brand_colors": ["#aa0000"] * 21}, "brand_colors", "at most 20"),
        ({"name": 7}, "name", "must be a string"),
        ({"name": "A", "colour": "x"}, "colour", "Unknown field"),
    ],
)
def test_offer_validation_names_the_field_with_the_forms_message(
    client, user, auth, body, field, words
):
    response = client.post("/api/offers", json=body, headers=auth.headers())
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["field"] == field and words in error["message"]
    assert client.get("/api/offers").get_json()["items"] == []  # nothing half-written


def test_a_persona_refuses_blank_goals_longer_than_allowed(client, user, auth):
    response = client.post(
        "/api/personas", json={"name": "Ann", "goals": "\u0085" * 2001}, headers=auth.headers()
    )
    assert response.status_code == 400
    assert response.get_json()["error"]["field"] == "goals"
    assert client.get("/api/personas").get_json()["items"] == []


def test_personas_take_only_your_own_offer(app, client, user, auth, bob):
    headers = auth.headers()
    mine = add_offer(app, user, "Mine")
    foreign = client.post(
        "/api/personas", json={"name": "Ann", "offer_id": bob["offer"]}, headers=headers
    )
    # Not yours: 404, as an id in a path (the document's offer_id is any id from 1).
    assert foreign.status_code == 404 and foreign.get_json()["error"]["field"] == "offer_id"
    zero = client.post("/api/personas", json={"name": "Ann", "offer_id": 0}, headers=headers)
    assert zero.status_code == 400 and zero.get_json()["error"]["field"] == "offer_id"
    created = client.post(
        "/api/personas", json={"name": "Ann", "offer_id": mine, "pains": "Time"}, headers=headers
    )
    assert created.status_code == 201
    persona = created.get_json()
    assert persona["offer_id"] == mine and persona["pains"] == "Time"
    cleared = client.patch(
        f"/api/personas/{persona['id']}", json={"offer_id": None}, headers=headers
    )
    assert cleared.get_json()["offer_id"] is None and cleared.get_json()["pains"] == "Time"
    assert client.delete(f"/api/personas/{persona['id']}", headers=headers).status_code == 204


def test_lists_page_with_a_cursor(app, client, user):
    for n in range(5):
        add_offer(app, user, f"Offer {n}")
    seen, cursor = [], None
    while True:
        query = "/api/offers?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = client.get(query).get_json()
        seen += [item["name"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"Offer {n}" for n in range(5)]
    bad = client.get("/api/offers?limit=0")
    assert bad.status_code == 400 and bad.get_json()["error"]["field"] == "limit"
    # A cursor past any id the database holds (beyond PostgreSQL's INTEGER): an empty page.
    past = client.get("/api/offers?cursor=9999999999")
    assert past.status_code == 200
    assert past.get_json() == {"items": [], "next_cursor": None}


def test_outputs_assets_characters_and_campaigns(app, client, user, auth):
    output = _add(app, Output(user_id=user, agent="copywriter", title="Hero", content={"h": "Hi"}))
    asset = _add(
        app, VisualAsset(user_id=user, title="Logo", content_type="image/png", data=b"PNG")
    )
    character = _add(app, Character(user_id=user, name="Mia", description="Baker"))
    campaign = _add(app, Campaign(user_id=user, name="Spring", briefing={"goal": "signups"}))

    assert client.get(f"/api/outputs/{output}").get_json()["content"] == {"h": "Hi"}
    listed = client.get("/api/assets").get_json()["items"]
    assert listed[0]["image_url"] == f"/api/assets/{asset}/image"
    image = client.get(listed[0]["image_url"])
    assert image.status_code == 200 and image.data == b"PNG"
    assert client.get(f"/api/characters/{character}").get_json()["name"] == "Mia"
    assert client.get("/api/campaigns").get_json()["items"][0]["briefing"] == {"goal": "signups"}
    assert client.get(f"/api/campaigns/{campaign}").get_json()["name"] == "Spring"

    for url in (f"/api/outputs/{output}", f"/api/assets/{asset}"):
        assert client.delete(url, headers=auth.headers()).status_code == 204
        assert client.get(url).status_code == 404
    # What the page does not allow, the API does not either.
    assert client.delete(f"/api/characters/{character}", headers=auth.headers()).status_code == 405


def test_another_persons_ids_are_404_for_every_verb(app, client, user, auth, bob):
    output = _add(app, Output(user_id=bob["id"], agent="a", title="t", content={}))
    asset = _add(app, VisualAsset(user_id=bob["id"], title="t"))
    character = _add(app, Character(user_id=bob["id"], name="c"))
    campaign = _add(app, Campaign(user_id=bob["id"], name="c"))
    headers = auth.headers()
    for url in (f"/api/offers/{bob['offer']}", f"/api/personas/{bob['persona']}"):
        assert client.get(url).status_code == 404
        assert client.patch(url, json={"name": "Mine now"}, headers=headers).status_code == 404
        assert client.delete(url, headers=headers).status_code == 404
    for url in (f"/api/outputs/{output}", f"/api/assets/{asset}"):
        assert client.get(url).status_code == 404
        assert client.delete(url, headers=headers).status_code == 404
    assert client.get(f"/api/assets/{asset}/image").status_code == 404
    assert client.get(f"/api/characters/{character}").status_code == 404
    assert client.get(f"/api/campaigns/{campaign}").status_code == 404
    as_bob = client.get(f"/api/offers/{bob['offer']}", headers=bearer(bob["raw_token"]))
    assert as_bob.status_code == 200


def test_deleting_an_offer_or_persona_on_the_page_keeps_what_was_made_for_it(
    app, client, user, auth
):
    offer = add_offer(app, user, "Gone soon")
    persona = add_persona(app, user, "Pat", offer_id=offer)
    output = _add(app, Output(user_id=user, offer_id=offer, agent="a", title="Copy", content={}))
    character = _add(app, Character(user_id=user, persona_id=persona, name="Mia"))

    page = client.get("/workspace/offers").get_data(as_text=True)
    assert f'action="/workspace/offers/{offer}/delete"' in page
    deleted = client.post(f"/workspace/offers/{offer}/delete", data={"csrf_token": auth.csrf})
    assert deleted.status_code == 302
    assert client.post(f"/workspace/personas/{persona}/delete", data={}).status_code == 400  # CSRF
    client.post(f"/workspace/personas/{persona}/delete", data={"csrf_token": auth.csrf})

    with database(app).session() as session:
        assert session.get(Output, output).offer_id is None
        assert session.get(Character, character).persona_id is None
        assert session.get(Persona, persona) is None
    assert client.get(f"/api/outputs/{output}").get_json()["title"] == "Copy"
