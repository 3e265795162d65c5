"""Workspace pages: offers and personas."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.workspace.models import Offer, Persona
from tests.factories import add_offer, add_persona, add_token
from tests.web.helpers import alerts, bearer, count, database, fetch, redirect_path, snapshot

GOOD_OFFER = {
    "name": "Calm Mornings",
    "description": "Coaching for founders.",
    "audience": "Busy founders",
    "price": "$490",
    "brand_colors": "#1f6feb, #FFD33D",
}
GOOD_PERSONA = {
    "name": "Overloaded Olivia",
    "offer_id": "0",
    "description": "Runs an agency.",
    "pains": "No mornings.",
    "goals": "Two calm hours.",
}


def only(app, model):
    with database(app).session() as session:
        return session.scalars(select(model)).one()


# Offers


def test_offers_page_empty_state(client, user):
    response = client.get("/workspace/offers")
    assert response.status_code == 200
    assert "Add your first offer" in response.get_data(as_text=True)


def test_workspace_home_goes_to_offers(client, user):
    assert redirect_path(client.get("/workspace/")) == "/workspace/offers"


def test_create_offer(app, client, auth, user):
    assert client.get("/workspace/offers/new").status_code == 200
    response = client.post("/workspace/offers/new", data={**GOOD_OFFER, "csrf_token": auth.csrf})
    assert redirect_path(response) == "/workspace/offers"
    offer = only(app, Offer)
    assert offer.user_id == user
    assert offer.name == "Calm Mornings"
    assert offer.price == "$490"
    assert offer.brand_colors == ["#1f6feb", "#FFD33D"]
    page = client.get("/workspace/offers").get_data(as_text=True)
    assert "Saved Calm Mornings." in page
    assert "Calm Mornings" in page and "#1f6feb" in page


def test_offers_page_lists_only_your_offers(app, client, user, bob):
    add_offer(app, user, "Ada's Academy")
    page = client.get("/workspace/offers").get_data(as_text=True)
    assert "Ada&#39;s Academy" in page
    assert "Bob&#39;s Bakery" not in page


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"brand_colors": "red"}, "'red' is not a colour"),
        ({"brand_colors": "#1f6feb, #12345"}, "'#12345' is not a colour"),
        ({"brand_colors": "#1f6feb; #ffd33d"}, "is not a colour"),
        ({"brand_colors": "#1f6feb," * 30}, "200"),
        ({"name": ""}, "This field is required."),
        ({"name": "   "}, "This field is required."),
        ({"name": "x" * 121}, "120"),
        ({"description": "x" * 4001}, "4000"),
        ({"audience": "x" * 2001}, "2000"),
        ({"price": "x" * 61}, "60"),
    ],
    ids=[
        "colour-word",
        "colour-short",
        "colour-separator",
        "colours-too-long",
        "no-name",
        "blank-name",
        "name-too-long",
        "description-too-long",
        "audience-too-long",
        "price-too-long",
    ],
)
def test_create_offer_with_bad_input_saves_nothing(app, client, auth, user, changes, message):
    response = client.post(
        "/workspace/offers/new", data={**GOOD_OFFER, **changes, "csrf_token": auth.csrf}
    )
    assert response.status_code == 400
    assert any(message in alert for alert in alerts(response)), alerts(response)
    assert count(app, Offer) == 0


def test_create_offer_without_csrf_token_saves_nothing(app, client, user):
    response = client.post("/workspace/offers/new", data=GOOD_OFFER)
    assert response.status_code == 400
    assert count(app, Offer) == 0


@pytest.fixture
def offer(app, user):
    return add_offer(
        app, user, "Trailhead Coffee", price="$24", brand_colors=["#6b3e26", "#e8c07d"]
    )


def test_edit_offer(app, client, auth, offer):
    form = client.get(f"/workspace/offers/{offer}/edit").get_data(as_text=True)
    assert 'value="Trailhead Coffee"' in form
    assert 'value="#6b3e26, #e8c07d"' in form
    response = client.post(
        f"/workspace/offers/{offer}/edit",
        data={
            "name": "Trailhead Beans",
            "price": "$26",
            "brand_colors": "",
            "csrf_token": auth.csrf,
        },
    )
    assert redirect_path(response) == "/workspace/offers"
    saved = fetch(app, Offer, offer)
    assert (saved.name, saved.price, saved.brand_colors) == ("Trailhead Beans", "$26", [])
    assert count(app, Offer) == 1


@pytest.mark.parametrize(
    "changes",
    [{"brand_colors": "#zzzzzz"}, {"name": "x" * 121}, {"name": ""}],
    ids=["bad-colour", "name-too-long", "no-name"],
)
def test_edit_offer_with_bad_input_changes_nothing(app, client, auth, offer, changes):
    before = snapshot(app)
    data = {"name": "Trailhead Coffee", "brand_colors": "#6b3e26", **changes}
    response = client.post(
        f"/workspace/offers/{offer}/edit", data={**data, "csrf_token": auth.csrf}
    )
    assert response.status_code == 400
    assert alerts(response)
    assert snapshot(app) == before


def test_edit_offer_without_csrf_token_changes_nothing(app, client, offer):
    before = snapshot(app)
    response = client.post(f"/workspace/offers/{offer}/edit", data={"name": "Stolen"})
    assert response.status_code == 400
    assert snapshot(app) == before


def test_edit_someone_elses_offer_is_404(app, client, auth, user, bob):
    before = snapshot(app)
    path = f"/workspace/offers/{bob['offer']}/edit"
    assert client.get(path).status_code == 404
    response = client.post(path, data={**GOOD_OFFER, "csrf_token": auth.csrf})
    assert response.status_code == 404
    assert snapshot(app) == before


def test_script_editing_an_offer_can_leave_fields_out(app, client, user, offer):
    """A bearer-token script posts only what it changes; the colours it leaves out stay."""
    _, raw = add_token(app, user)
    response = app.test_client().post(
        f"/workspace/offers/{offer}/edit", data={"name": "Renamed by a script"}, headers=bearer(raw)
    )
    assert redirect_path(response) == "/workspace/offers"
    saved = fetch(app, Offer, offer)
    assert saved.name == "Renamed by a script"
    assert saved.brand_colors == ["#6b3e26", "#e8c07d"]
    assert saved.price == "$24"


# Personas


def test_personas_page_empty_state(client, user):
    response = client.get("/workspace/personas")
    assert response.status_code == 200
    assert "Add your first persona" in response.get_data(as_text=True)


def test_persona_form_offers_only_your_offers(client, user, offer, bob):
    html = client.get("/workspace/personas/new").get_data(as_text=True)
    assert "Trailhead Coffee" in html
    assert "Bob&#39;s Bakery" not in html


def test_create_persona_for_an_offer(app, client, auth, user, offer):
    response = client.post(
        "/workspace/personas/new",
        data={**GOOD_PERSONA, "offer_id": str(offer), "csrf_token": auth.csrf},
    )
    assert redirect_path(response) == "/workspace/personas"
    persona = only(app, Persona)
    assert (persona.user_id, persona.offer_id, persona.name) == (user, offer, "Overloaded Olivia")
    assert persona.pains == "No mornings."
    page = client.get("/workspace/personas").get_data(as_text=True)
    assert "Overloaded Olivia" in page and "For Trailhead Coffee" in page


def test_create_persona_for_any_offer(app, client, auth, user):
    response = client.post(
        "/workspace/personas/new", data={**GOOD_PERSONA, "csrf_token": auth.csrf}
    )
    assert redirect_path(response) == "/workspace/personas"
    assert only(app, Persona).offer_id is None


def test_personas_page_lists_only_your_personas(app, client, user, bob):
    add_persona(app, user, "Ada's Buyer")
    page = client.get("/workspace/personas").get_data(as_text=True)
    assert "Ada&#39;s Buyer" in page
    assert "Bob&#39;s Buyer" not in page


@pytest.mark.parametrize(
    "changes",
    [
        {"offer_id": "OTHER"},
        {"offer_id": "abc"},
        {"offer_id": "999"},
        {"name": ""},
        {"name": "x" * 121},
        {"description": "x" * 4001},
        {"pains": "x" * 2001},
        {"goals": "x" * 2001},
    ],
    ids=[
        "someone-elses-offer",
        "offer-not-a-number",
        "offer-missing",
        "no-name",
        "name-too-long",
        "description-too-long",
        "pains-too-long",
        "goals-too-long",
    ],
)
def test_create_persona_with_bad_input_saves_nothing(app, client, auth, user, bob, changes):
    if changes.get("offer_id") == "OTHER":
        changes = {"offer_id": str(bob["offer"])}
    before = snapshot(app)
    response = client.post(
        "/workspace/personas/new", data={**GOOD_PERSONA, **changes, "csrf_token": auth.csrf}
    )
    assert response.status_code == 400
    assert alerts(response)
    if "offer_id" in changes:
        assert any("choice" in alert.lower() for alert in alerts(response)), alerts(response)
    assert snapshot(app) == before


def test_create_persona_without_csrf_token_saves_nothing(app, client, user):
    response = client.post("/workspace/personas/new", data=GOOD_PERSONA)
    assert response.status_code == 400
    assert count(app, Persona) == 0


@pytest.fixture
def persona(app, user, offer):
    return add_persona(app, user, "Weekend Ben", offer_id=offer)


def test_edit_persona(app, client, auth, persona):
    form = client.get(f"/workspace/personas/{persona}/edit").get_data(as_text=True)
    assert 'value="Weekend Ben"' in form
    response = client.post(
        f"/workspace/personas/{persona}/edit",
        data={
            "name": "Barista Ben",
            "offer_id": "0",
            "goals": "Better beans",
            "csrf_token": auth.csrf,
        },
    )
    assert redirect_path(response) == "/workspace/personas"
    saved = fetch(app, Persona, persona)
    assert (saved.name, saved.offer_id, saved.goals) == ("Barista Ben", None, "Better beans")


def test_edit_persona_pointing_at_someone_elses_offer_changes_nothing(
    app, client, auth, persona, bob
):
    before = snapshot(app)
    response = client.post(
        f"/workspace/personas/{persona}/edit",
        data={"name": "Weekend Ben", "offer_id": str(bob["offer"]), "csrf_token": auth.csrf},
    )
    assert response.status_code == 400
    assert any("choice" in alert.lower() for alert in alerts(response))
    assert snapshot(app) == before


def test_edit_persona_without_csrf_token_changes_nothing(app, client, persona):
    before = snapshot(app)
    response = client.post(
        f"/workspace/personas/{persona}/edit", data={"name": "X", "offer_id": "0"}
    )
    assert response.status_code == 400
    assert snapshot(app) == before


def test_edit_someone_elses_persona_is_404(app, client, auth, user, bob):
    before = snapshot(app)
    path = f"/workspace/personas/{bob['persona']}/edit"
    assert client.get(path).status_code == 404
    response = client.post(path, data={**GOOD_PERSONA, "csrf_token": auth.csrf})
    assert response.status_code == 404
    assert snapshot(app) == before
