"""Question cards on the chat page: one partial for every UI tool's card, and the form
route that answers it and resumes the run (fake model)."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import pytest
from flask import render_template
from sqlalchemy import select
from werkzeug.datastructures import MultiDict

from app.chat.models import Message, Run
from app.web.cards import card_view, parse_answer, parse_confirmation
from app.workspace.models import Character, ImagePreset, Offer, Persona, VisualAsset
from tests.factories import add_conversation, add_offer, add_user
from tests.fake_model import Turn, text, tool_use
from tests.web.helpers import (
    anonymous_csrf,
    assert_redirects_to_login,
    database,
    json_error,
    redirect_path,
)

HTMX = {"HX-Request": "true"}
XSS = "<script>alert(1)</script>"
ATTR_XSS = '" onmouseover="alert(1)'


@pytest.fixture
def app(app_on_fake_model):
    """These tests talk to the fake model server."""
    return app_on_fake_model


@pytest.fixture
def workspace(app, chat):
    """Ada's offers (one with a picture), personas (one with a portrait) and a preset."""
    user_id = _user_id(app)
    with database(app).session() as session:
        calm = Offer(user_id=user_id, name="Calm Mornings", description="Coaching", price="$490")
        plain = Offer(user_id=user_id, name="Plain Offer", description="No picture")
        session.add_all([calm, plain])
        session.flush()
        picture = VisualAsset(user_id=user_id, offer_id=calm.id, title="hero", data=b"png")
        founders = Persona(
            user_id=user_id, offer_id=calm.id, name="Busy founders", description="Short on time"
        )
        parents = Persona(user_id=user_id, name="New parents", description="Tired")
        session.add_all([picture, founders, parents])
        session.flush()
        portrait = VisualAsset(user_id=user_id, title="portrait", data=b"png")
        session.add(portrait)
        session.flush()
        session.add(
            Character(
                user_id=user_id, persona_id=founders.id, portrait_asset_id=portrait.id, name="Olive"
            )
        )
        preset = ImagePreset(
            user_id=None, name="Editorial", description="Soft light", aspect_ratio="4:5"
        )
        session.add(preset)
        session.commit()
        return {
            "calm": calm.id,
            "plain": plain.id,
            "picture": picture.id,
            "founders": founders.id,
            "parents": parents.id,
            "portrait": portrait.id,
            "preset": preset.id,
        }


# --- helpers ---------------------------------------------------------------------------


def _user_id(app, email="ada@example.com"):
    from app.accounts.models import User

    with database(app).session() as session:
        return session.scalar(select(User.id).where(User.email == email))


def pause(chat, fake_model, tool: str, args: dict, tool_use_id: str) -> int:
    """A chat whose run has paused on `tool`'s card."""
    fake_model.script(Turn(text("One question first."), tool_use(tool, args, id=tool_use_id)))
    chat_id = chat.new_chat()
    run = chat.wait(chat.send(chat_id, "Help me"))
    assert run["status"] == "awaiting", run
    card = chat.rows(chat_id)[-1]["card"]
    assert card["toolUseId"] == tool_use_id and card["status"] == "awaiting"
    return chat_id


def card_row(chat, chat_id) -> dict:
    return [row for row in chat.rows(chat_id) if row["kind"] == "card"][-1]


def post_card(chat, chat_id, tool_use_id, data, *, htmx=True, csrf=True, headers=None):
    form = MultiDict(data)
    if csrf:
        form.add("csrf_token", chat.auth.headers()["X-CSRFToken"])
    return chat.client.post(
        f"/chats/{chat_id}/cards/{tool_use_id}",
        data=form,
        headers={**(HTMX if htmx else {}), **(headers or {})},
    )


def value(option_value) -> str:
    """What the form posts for an option: its value, JSON-encoded."""
    return json.dumps(option_value)


def latest_run(app, chat_id) -> int:
    with database(app).session() as session:
        return session.scalar(
            select(Run.id).where(Run.conversation_id == chat_id).order_by(Run.id.desc()).limit(1)
        )


def resume(app, chat, fake_model, chat_id) -> dict:
    """Wait for the run the answer started; return what the model was sent."""
    run = chat.wait(latest_run(app, chat_id))
    assert run["status"] == "completed", run
    assert fake_model.rejections == []
    return run


def tool_result_sent(fake_model, tool_use_id) -> str:
    """The tool_result content the model received for `tool_use_id` (the latest call)."""
    for request in reversed(fake_model.requests):
        for message in request.get("messages", []):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                    return block["content"]
    raise AssertionError(f"no tool_result for {tool_use_id} was sent")


def card_html(page: str, tool_use_id: str) -> str:
    """The card's <section> (with nested sections) out of a page or partial."""
    start = page.index(f'<section id="card-{tool_use_id}"')
    depth = 0
    for match in re.finditer(r"<(/?)section\b", page[start:]):
        depth += -1 if match.group(1) else 1
        if depth == 0:
            end = page.index(">", start + match.end()) + 1
            return page[start:end]
    raise AssertionError("unbalanced card section")


def visible_text(markup: str) -> str:
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())
    return text.replace(" ,", ",")


class Elements(HTMLParser):
    """Start tags with their attributes (entity-decoded), in document order."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict]] = []
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, {name: (val if val is not None else "") for name, val in attrs}))

    def all(self, tag: str, **attrs) -> list[dict]:
        wanted = {key.rstrip("_").replace("_", "-"): val for key, val in attrs.items()}
        return [
            found
            for name, found in self.found
            if name == tag and all(found.get(key) == val for key, val in wanted.items())
        ]

    def one(self, tag: str, **attrs) -> dict:
        matches = self.all(tag, **attrs)
        assert len(matches) == 1, (tag, attrs, matches)
        return matches[0]


def assert_awaiting_form(section: str, chat_id: int, tool_use_id: str, sequence: int, csrf: str):
    found = Elements(section)
    root = found.one("section", id=f"card-{tool_use_id}")
    assert root["data-status"] == "awaiting"
    form = found.one("form")
    url = f"/chats/{chat_id}/cards/{tool_use_id}"
    assert form["hx-post"] == url and form["action"] == url and form["method"] == "post"
    assert form["hx-target"] == f"#m-{sequence}" and form["hx-swap"] == "outerHTML"
    # The same session token (signed tokens differ only in their timestamp and signature).
    token = found.one("input", name="csrf_token", type="hidden")["value"]
    assert token.split(".")[0] == csrf.split(".")[0]
    assert found.all("fieldset") and len(found.all("fieldset")) == len(found.all("legend"))
    assert found.one("button", name="dismiss", value="1")["type"] == "submit"
    assert "formnovalidate" in found.one("button", name="dismiss", value="1")
    # The submit button comes before Skip, so Enter in a field never skips the card.
    buttons = [attrs for tag, attrs in found.found if tag == "button" and attrs["type"] == "submit"]
    assert buttons[0].get("name") != "dismiss"
    for tag in ("script", "style"):
        assert f"<{tag}" not in section
    assert " style=" not in section and "hx-on" not in section and "onclick" not in section
    return found


def options_of(found: Elements, step_id: str) -> list[dict]:
    return [
        attrs
        for tag, attrs in found.found
        if tag == "input"
        and attrs.get("name") == step_id
        and attrs["type"] in ("radio", "checkbox")
    ]


def assert_each_option_labelled(found: Elements, section: str, inputs: list[dict]) -> None:
    for attrs in inputs:
        label = found.one("label", for_=attrs["id"])
        assert "card-option" in label["class"]
        assert found.one("span", id=attrs["aria-labelledby"])  # the option's own label text
        # The input sits inside its <label>.
        start = section.index(f'for="{attrs["id"]}"')
        assert section.index(f'id="{attrs["id"]}"', start) < section.index("</label>", start)


# --- the card on the page --------------------------------------------------------------


def test_select_offer_card_shows_offers_as_tiles_with_thumbnail_and_badge(
    app, chat, fake_model, workspace
):
    chat_id = pause(chat, fake_model, "select_offer", {"prompt": "Which offer?"}, "toolu_offer")
    row = card_row(chat, chat_id)

    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    section = card_html(page, "toolu_offer")
    found = assert_awaiting_form(
        section, chat_id, "toolu_offer", row["sequence"], chat.auth.headers()["X-CSRFToken"]
    )
    assert found.one("legend")  # one question: the card's title is its legend
    assert "Which offer?" in section
    inputs = options_of(found, "offer")
    assert [i["type"] for i in inputs] == ["radio", "radio"]
    assert [i["value"] for i in inputs] == [value(workspace["calm"]), value(workspace["plain"])]
    assert all("required" in i for i in inputs)
    assert_each_option_labelled(found, section, inputs)
    image = found.one("img", class_="card-option-thumb")
    assert image["src"] == f"/workspace/assets/{workspace['picture']}"
    assert image["alt"] == "Calm Mornings"
    assert "$490" in section and "Coaching" in section
    # Decoration comes from the option's own fields: the offer without them gets none.
    plain = found.one("label", for_=inputs[1]["id"])
    assert "has-thumb" not in plain["class"]
    assert (
        "aria-describedby" in inputs[0]
        and "card-toolu_offer-offer-0-desc" in (inputs[0]["aria-describedby"])
    )


def test_select_persona_card(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_persona", {}, "toolu_persona")
    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    section = card_html(page, "toolu_persona")
    found = assert_awaiting_form(
        section,
        chat_id,
        "toolu_persona",
        card_row(chat, chat_id)["sequence"],
        chat.auth.headers()["X-CSRFToken"],
    )
    inputs = options_of(found, "persona")
    assert [i["value"] for i in inputs] == [
        value(workspace["founders"]),
        value(workspace["parents"]),
    ]
    assert found.one("img")["src"] == f"/workspace/assets/{workspace['portrait']}"
    assert "Calm Mornings" in section  # the badge: the persona's offer
    assert "Short on time" in section


def test_ask_user_with_options_only(app, chat, fake_model):
    args = {
        "question": "Which colour?",
        "options": [
            {"label": "Red", "value": "red", "description": "Warm and loud"},
            {"label": "Blue", "value": "blue"},
        ],
    }
    chat_id = pause(chat, fake_model, "ask_user", args, "toolu_ask")
    section = card_html(chat.client.get(f"/chats/{chat_id}").get_data(as_text=True), "toolu_ask")
    found = assert_awaiting_form(
        section,
        chat_id,
        "toolu_ask",
        card_row(chat, chat_id)["sequence"],
        chat.auth.headers()["X-CSRFToken"],
    )
    inputs = options_of(found, "answer")
    assert [i["value"] for i in inputs] == ['"red"', '"blue"']
    assert 'value="&#34;red&#34;"' in section  # JSON in the attribute, escaped
    assert not found.all("input", name="answer__text")
    assert found.one("p", id="card-toolu_ask-answer-hint")["class"] == "hint card-hint"
    assert "card-toolu_ask-answer-hint" in found.one("fieldset")["aria-describedby"]


def test_ask_user_with_options_and_free_text(app, chat, fake_model):
    args = {
        "question": "Which colour?",
        "options": [{"label": "Red", "value": "red"}],
        "allow_free_text": True,
    }
    chat_id = pause(chat, fake_model, "ask_user", args, "toolu_ask")
    section = card_html(chat.client.get(f"/chats/{chat_id}").get_data(as_text=True), "toolu_ask")
    found = Elements(section)
    free = found.one("input", name="answer__text")
    assert free["type"] == "text" and free["maxlength"] == "2000"
    assert found.one("label", for_=free["id"])
    # A typed answer is enough, so the radio is not required by the markup.
    assert "required" not in options_of(found, "answer")[0]
    assert found.one("fieldset")["data-free-text"] == "true"


def test_ask_user_free_text_only(app, chat, fake_model):
    chat_id = pause(chat, fake_model, "ask_user", {"question": "What is your name?"}, "toolu_ask")
    section = card_html(chat.client.get(f"/chats/{chat_id}").get_data(as_text=True), "toolu_ask")
    found = Elements(section)
    area = found.one("textarea", name="answer")
    assert "required" in area and area["maxlength"] == "2000"
    assert area["aria-labelledby"] == "card-toolu_ask-answer-legend"
    assert not options_of(found, "answer")


def test_configure_image_is_a_multi_step_card(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "configure_image", {}, "toolu_image")
    section = card_html(chat.client.get(f"/chats/{chat_id}").get_data(as_text=True), "toolu_image")
    found = assert_awaiting_form(
        section,
        chat_id,
        "toolu_image",
        card_row(chat, chat_id)["sequence"],
        chat.auth.headers()["X-CSRFToken"],
    )
    steps = found.all("fieldset")
    assert [s["data-step-id"] for s in steps] == ["preset", "aspect_ratio", "subject"]
    assert [i["value"] for i in options_of(found, "preset")] == [value(workspace["preset"])]
    assert [i["value"] for i in options_of(found, "aspect_ratio")] == [
        '"1:1"',
        '"4:5"',
        '"9:16"',
        '"16:9"',
    ]
    assert found.one("textarea", name="subject")["maxlength"] == "1000"
    # Back / Next and the summary exist for the script; without it every step shows.
    assert "hidden" in found.one("button", class_="card-back")
    assert "hidden" in found.one("button", class_="primary card-next")
    assert "hidden" in found.one("section", class_="card-review")
    assert not any("hidden" in step for step in steps)
    assert "1 of 3" in section and "3 of 3" in section


def test_campaign_briefing_card_has_every_step(app, chat, fake_model, workspace):
    args = {"offer_id": workspace["calm"]}
    chat_id = pause(chat, fake_model, "collect_campaign_briefing", args, "toolu_brief")
    section = card_html(chat.client.get(f"/chats/{chat_id}").get_data(as_text=True), "toolu_brief")
    found = assert_awaiting_form(
        section,
        chat_id,
        "toolu_brief",
        card_row(chat, chat_id)["sequence"],
        chat.auth.headers()["X-CSRFToken"],
    )
    assert [s["data-step-id"] for s in found.all("fieldset")] == [
        "goal",
        "offer",
        "audience",
        "channels",
        "budget",
        "timing",
        "notes",
    ]
    assert found.one("h2", id="card-toolu_brief-title")
    offer = options_of(found, "offer")
    assert len(offer) == 1 and "checked" in offer[0]  # the card's default
    channels = options_of(found, "channels")
    assert {c["type"] for c in channels} == {"checkbox"}
    assert all("required" not in c for c in channels)  # "at least one" is the script's job
    assert found.one("input", name="audience__text")
    assert "required" not in found.one("textarea", name="notes")
    assert "required" in found.one("textarea", name="budget")
    assert found.one("fieldset", data_step_id="notes")["data-required"] == "false"


# --- answering -------------------------------------------------------------------------


def test_answering_a_single_choice_resumes_the_run(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    sequence = card_row(chat, chat_id)["sequence"]
    fake_model.script("Great, Calm Mornings it is.")

    response = post_card(chat, chat_id, "toolu_offer", {"offer": value(workspace["calm"])})

    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert body.lstrip().startswith(f'<article id="m-{sequence}"')
    section = card_html(body, "toolu_offer")
    assert 'data-status="answered"' in section and "<form" not in section
    assert "Calm Mornings" in section
    resume(app, chat, fake_model, chat_id)
    assert tool_result_sent(fake_model, "toolu_offer") == json.dumps(
        {"offer_id": workspace["calm"]}
    )
    assert card_row(chat, chat_id)["card"]["answer"] == {"offer_id": workspace["calm"]}
    # The page now shows the summary, read-only.
    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    assert "<form" not in card_html(page, "toolu_offer")


def test_answering_with_an_option_of_ask_user(app, chat, fake_model):
    args = {"question": "Colour?", "options": [{"label": "Red", "value": "red"}]}
    chat_id = pause(chat, fake_model, "ask_user", args, "toolu_ask")
    fake_model.script("Red it is.")
    response = post_card(chat, chat_id, "toolu_ask", {"answer": '"red"'})
    assert response.status_code == 200
    resume(app, chat, fake_model, chat_id)
    assert tool_result_sent(fake_model, "toolu_ask") == json.dumps({"value": "red"})


def test_answering_with_typed_text_where_free_text_is_allowed(app, chat, fake_model):
    args = {
        "question": "Colour?",
        "options": [{"label": "Red", "value": "red"}],
        "allow_free_text": True,
    }
    chat_id = pause(chat, fake_model, "ask_user", args, "toolu_ask")
    fake_model.script("Teal, noted.")
    # A typed answer wins over a ticked choice (a browser without script cannot untick).
    response = post_card(
        chat, chat_id, "toolu_ask", {"answer": '"red"', "answer__text": "  Teal, like <b>  "}
    )
    assert response.status_code == 200
    section = card_html(response.get_data(as_text=True), "toolu_ask")
    assert "Teal, like &lt;b&gt;" in section
    resume(app, chat, fake_model, chat_id)
    assert tool_result_sent(fake_model, "toolu_ask") == json.dumps(
        {"text": "Teal, like <b>"}, ensure_ascii=False
    )


def test_answering_a_free_text_question(app, chat, fake_model):
    chat_id = pause(chat, fake_model, "ask_user", {"question": "Your name?"}, "toolu_ask")
    fake_model.script("Hello Ada.")
    response = post_card(chat, chat_id, "toolu_ask", {"answer": "Ada Lovelace"})
    assert response.status_code == 200
    assert "Ada Lovelace" in response.get_data(as_text=True)
    resume(app, chat, fake_model, chat_id)
    assert tool_result_sent(fake_model, "toolu_ask") == json.dumps({"text": "Ada Lovelace"})


def test_answering_the_campaign_briefing(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "collect_campaign_briefing", {}, "toolu_brief")
    fake_model.script("Briefing saved.")
    form = MultiDict(
        [
            ("goal", '"leads"'),
            ("offer", value(workspace["calm"])),
            ("audience", value(workspace["founders"])),
            ("audience__text", ""),
            # Ticked out of order: the answer lists them in the card's order, once.
            ("channels", '"email"'),
            ("channels", '"meta_ads"'),
            ("channels", '"email"'),
            ("budget", "$500 per month"),
            ("timing", "Start 1 June"),
            ("notes", ""),
        ]
    )
    response = post_card(chat, chat_id, "toolu_brief", form)

    assert response.status_code == 200, response.get_data(as_text=True)
    section = card_html(response.get_data(as_text=True), "toolu_brief")
    assert "<form" not in section
    shown = visible_text(section)
    for answer in ("Leads", "Calm Mornings", "Busy founders", "Meta ads, Email", "$500 per month"):
        assert answer in shown
    assert "Anything else? No answer" in shown  # the optional notes
    resume(app, chat, fake_model, chat_id)
    expected = {
        "answers": {
            "goal": "leads",
            "offer": workspace["calm"],
            "audience": workspace["founders"],
            "channels": ["meta_ads", "email"],
            "budget": "$500 per month",
            "timing": "Start 1 June",
            "notes": "",
        }
    }
    assert tool_result_sent(fake_model, "toolu_brief") == json.dumps(expected)


def test_answering_the_briefing_with_the_audience_in_own_words(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "collect_campaign_briefing", {}, "toolu_brief")
    fake_model.script("Saved.")
    form = {
        "goal": '"sales"',
        "offer": value(workspace["plain"]),
        "audience__text": "Retired teachers",
        "channels": '"email"',
        "budget": "$100",
        "timing": "Now",
        "notes": "No stock photos",
    }
    assert post_card(chat, chat_id, "toolu_brief", form).status_code == 200
    resume(app, chat, fake_model, chat_id)
    answers = json.loads(tool_result_sent(fake_model, "toolu_brief"))["answers"]
    assert answers["audience"] == "Retired teachers"
    assert answers["channels"] == ["email"] and answers["notes"] == "No stock photos"


def test_answering_configure_image(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "configure_image", {}, "toolu_image")
    fake_model.script("Generating.")
    form = {
        "preset": value(workspace["preset"]),
        "aspect_ratio": '"4:5"',
        "subject": "A calm desk",
    }
    assert post_card(chat, chat_id, "toolu_image", form).status_code == 200
    resume(app, chat, fake_model, chat_id)
    assert tool_result_sent(fake_model, "toolu_image") == json.dumps(
        {
            "answers": {
                "preset": workspace["preset"],
                "aspect_ratio": "4:5",
                "subject": "A calm desk",
            }
        }
    )


def test_skipping_sends_dismissed(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    fake_model.script("No problem.")
    response = post_card(chat, chat_id, "toolu_offer", {"dismiss": "1"})
    assert response.status_code == 200
    section = card_html(response.get_data(as_text=True), "toolu_offer")
    assert 'data-status="dismissed"' in section and "Skipped" in section
    resume(app, chat, fake_model, chat_id)
    assert json.loads(tool_result_sent(fake_model, "toolu_offer")) == {"dismissed": True}
    assert card_row(chat, chat_id)["card"]["status"] == "dismissed"


def test_skipping_ignores_half_filled_answers(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "collect_campaign_briefing", {}, "toolu_brief")
    fake_model.script("Fine.")
    response = post_card(chat, chat_id, "toolu_brief", {"dismiss": "1", "goal": '"nope"'})
    assert response.status_code == 200
    resume(app, chat, fake_model, chat_id)
    assert json.loads(tool_result_sent(fake_model, "toolu_brief")) == {"dismissed": True}


def test_a_plain_form_post_redirects_to_the_chat(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    fake_model.script("Done.")
    response = post_card(
        chat, chat_id, "toolu_offer", {"offer": value(workspace["plain"])}, htmx=False
    )
    assert response.status_code == 303
    assert redirect_path(response) == f"/chats/{chat_id}"
    resume(app, chat, fake_model, chat_id)
    assert card_row(chat, chat_id)["card"]["answer"] == {"offer_id": workspace["plain"]}


def test_a_json_client_gets_json(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    bad = post_card(
        chat, chat_id, "toolu_offer", {"offer": "999"}, htmx=False, headers=_json_accept()
    )
    assert json_error(bad, 400) == "INVALID_ANSWER"
    fake_model.script("Done.")
    good = post_card(
        chat,
        chat_id,
        "toolu_offer",
        {"offer": value(workspace["calm"])},
        htmx=False,
        headers=_json_accept(),
    )
    assert good.status_code == 202
    assert good.get_json()["row"]["card"]["status"] == "answered"
    chat.wait(good.get_json()["runId"])
    assert (
        json_error(
            post_card(
                chat, chat_id, "toolu_offer", {"dismiss": "1"}, headers=_json_accept(), htmx=False
            ),
            409,
        )
        == "CARD_NOT_AWAITING"
    )


def _json_accept() -> dict:
    return {"Accept": "application/json"}


# --- refusals --------------------------------------------------------------------------


def assert_still_awaiting(chat, chat_id, tool_use_id):
    card = card_row(chat, chat_id)["card"]
    assert card["toolUseId"] == tool_use_id and card["status"] == "awaiting"
    with database(chat.app).session() as session:
        hidden = session.scalars(
            select(Message).where(Message.conversation_id == chat_id, Message.kind == "tool_result")
        ).all()
        assert all(
            block.get("tool_use_id") != tool_use_id
            for row in hidden
            for block in row.meta.get("blocks", [])
        )


def step_error(section: str, step_dom_id: str) -> str:
    found = Elements(section)
    alert = found.one("p", id=f"{step_dom_id}-error")
    assert alert["role"] == "alert"
    assert f"{step_dom_id}-error" in found.one("fieldset", id=step_dom_id)["aria-describedby"]
    match = re.search(rf'id="{step_dom_id}-error" role="alert">([^<]*)<', section)
    return html.unescape(match.group(1))


def test_an_unknown_option_value_is_400_and_shows_on_its_step(app, chat, fake_model):
    args = {"question": "Colour?", "options": [{"label": "Red", "value": "red"}]}
    chat_id = pause(chat, fake_model, "ask_user", args, "toolu_ask")
    sequence = card_row(chat, chat_id)["sequence"]
    requests_before = len(fake_model.requests)

    response = post_card(chat, chat_id, "toolu_ask", {"answer": '"purple"'})

    assert response.status_code == 400
    body = response.get_data(as_text=True)
    assert body.lstrip().startswith(f'<article id="m-{sequence}"')
    section = card_html(body, "toolu_ask")
    assert "<form" in section
    assert "not one of the choices" in step_error(section, "card-toolu_ask-answer")
    assert Elements(section).all("input", name="answer")[0]["aria-invalid"] == "true"
    assert_still_awaiting(chat, chat_id, "toolu_ask")
    assert len(fake_model.requests) == requests_before


@pytest.mark.parametrize("posted", ["purple", "", '{"x": 1}', "true", '"red"x'])
def test_values_that_are_not_the_options_json_are_400(app, chat, fake_model, posted):
    args = {"question": "Colour?", "options": [{"label": "Red", "value": "red"}]}
    chat_id = pause(chat, fake_model, "ask_user", args, "toolu_ask")
    assert post_card(chat, chat_id, "toolu_ask", {"answer": posted}).status_code == 400
    assert_still_awaiting(chat, chat_id, "toolu_ask")


def test_two_answers_to_a_single_choice_are_400(app, chat, fake_model):
    args = {
        "question": "Colour?",
        "options": [{"label": "Red", "value": "red"}, {"label": "Blue", "value": "blue"}],
    }
    chat_id = pause(chat, fake_model, "ask_user", args, "toolu_ask")
    form = MultiDict([("answer", '"red"'), ("answer", '"blue"')])
    assert post_card(chat, chat_id, "toolu_ask", form).status_code == 400
    assert_still_awaiting(chat, chat_id, "toolu_ask")


def test_a_missing_required_step_is_400_and_keeps_the_other_answers(
    app, chat, fake_model, workspace
):
    chat_id = pause(chat, fake_model, "collect_campaign_briefing", {}, "toolu_brief")
    form = {
        "goal": '"leads"',
        "offer": value(workspace["calm"]),
        "audience__text": "Teachers",
        "budget": "$100",
        "timing": "   ",
    }
    response = post_card(chat, chat_id, "toolu_brief", form)

    assert response.status_code == 400
    section = card_html(response.get_data(as_text=True), "toolu_brief")
    assert "needs an answer" in step_error(section, "card-toolu_brief-channels")
    assert "needs an answer" in step_error(section, "card-toolu_brief-timing")
    found = Elements(section)
    assert found.one("fieldset", id="card-toolu_brief-channels")["data-has-error"] == "true"
    assert "checked" in found.one("input", name="goal", value='"leads"')
    assert found.one("input", name="audience__text")["value"] == "Teachers"
    assert ">$100</textarea>" in section
    assert_still_awaiting(chat, chat_id, "toolu_brief")


def test_too_long_text_is_400(app, chat, fake_model):
    chat_id = pause(chat, fake_model, "ask_user", {"question": "Your story?"}, "toolu_ask")
    response = post_card(chat, chat_id, "toolu_ask", {"answer": "x" * 2001})
    assert response.status_code == 400
    section = card_html(response.get_data(as_text=True), "toolu_ask")
    assert "too long" in step_error(section, "card-toolu_ask-answer")
    assert_still_awaiting(chat, chat_id, "toolu_ask")


def test_too_long_free_text_is_400(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "collect_campaign_briefing", {}, "toolu_brief")
    form = {
        "goal": '"leads"',
        "offer": value(workspace["calm"]),
        "audience__text": "y" * 501,
        "channels": '"email"',
        "budget": "$1",
        "timing": "Now",
    }
    response = post_card(chat, chat_id, "toolu_brief", form)
    assert response.status_code == 400
    assert "too long" in step_error(
        card_html(response.get_data(as_text=True), "toolu_brief"), "card-toolu_brief-audience"
    )


def test_someone_elses_offer_is_400(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    eves_offer = add_offer(app, add_user(app, "eve@example.com"), "Eve's secret offer")
    response = post_card(chat, chat_id, "toolu_offer", {"offer": value(eves_offer)})
    assert response.status_code == 400
    assert "Eve" not in response.get_data(as_text=True)
    assert_still_awaiting(chat, chat_id, "toolu_offer")


def test_an_offer_deleted_since_the_card_was_shown_is_400_from_the_tools_check(
    app, chat, fake_model, workspace
):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    with database(app).session() as session:
        session.delete(session.get(Offer, workspace["plain"]))
        session.commit()
    response = post_card(chat, chat_id, "toolu_offer", {"offer": value(workspace["plain"])})
    assert response.status_code == 400
    section = card_html(response.get_data(as_text=True), "toolu_offer")
    assert "No offer with id" in step_error(section, "card-toolu_offer-offer")
    assert "checked" in Elements(section).one("input", value=value(workspace["plain"]))
    assert_still_awaiting(chat, chat_id, "toolu_offer")


def test_a_refused_plain_form_post_shows_the_page_with_the_error(app, chat, fake_model):
    chat_id = pause(chat, fake_model, "ask_user", {"question": "Your name?"}, "toolu_ask")
    response = post_card(chat, chat_id, "toolu_ask", {"answer": " "}, htmx=False)
    assert response.status_code == 400
    page = response.get_data(as_text=True)
    assert '<h1 id="chat-title">' in page
    assert "needs an answer" in step_error(card_html(page, "toolu_ask"), "card-toolu_ask-answer")


def test_answering_an_answered_card_is_409_and_shows_it_read_only(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    fake_model.script("Done.")
    assert (
        post_card(chat, chat_id, "toolu_offer", {"offer": value(workspace["calm"])}).status_code
        == 200
    )
    resume(app, chat, fake_model, chat_id)
    requests_before = len(fake_model.requests)

    again = post_card(chat, chat_id, "toolu_offer", {"offer": value(workspace["plain"])})

    assert again.status_code == 409
    section = card_html(again.get_data(as_text=True), "toolu_offer")
    assert "<form" not in section and 'data-status="answered"' in section
    assert "Calm Mornings" in section
    assert re.search(r'role="alert">[^<]*not waiting for an answer', section)
    assert card_row(chat, chat_id)["card"]["answer"] == {"offer_id": workspace["calm"]}
    assert len(fake_model.requests) == requests_before


def test_an_unknown_tool_use_id_is_409(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    response = post_card(chat, chat_id, "toolu_other", {"offer": value(workspace["calm"])})
    assert response.status_code == 409
    assert response.headers["HX-Reswap"] == "none"
    assert_still_awaiting(chat, chat_id, "toolu_offer")


def test_someone_elses_conversation_is_404(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    eve = add_user(app, "eve@example.com")
    eves_chat = add_conversation(app, eve, "Eve's chat")
    response = post_card(chat, eves_chat, "toolu_offer", {"offer": value(workspace["calm"])})
    assert response.status_code == 404
    assert "Eve" not in response.get_data(as_text=True)
    # Logged in as Eve, Ada's card is not hers to answer either.
    chat.auth.logout()
    chat.auth.login("eve@example.com")
    response = post_card(chat, chat_id, "toolu_offer", {"offer": value(workspace["calm"])})
    assert response.status_code == 404
    assert "Calm Mornings" not in response.get_data(as_text=True)
    chat.auth.logout()
    chat.auth.login()
    assert_still_awaiting(chat, chat_id, "toolu_offer")


def test_without_the_csrf_token_nothing_happens(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    response = post_card(
        chat, chat_id, "toolu_offer", {"offer": value(workspace["calm"])}, csrf=False
    )
    assert response.status_code == 400
    assert_still_awaiting(chat, chat_id, "toolu_offer")


def test_logged_out_posts_go_to_login(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    stranger = app.test_client()
    response = stranger.post(
        f"/chats/{chat_id}/cards/toolu_offer",
        data={"offer": value(workspace["calm"]), "csrf_token": anonymous_csrf(stranger)},
    )
    assert_redirects_to_login(response)
    assert_still_awaiting(chat, chat_id, "toolu_offer")


# --- escaping --------------------------------------------------------------------------


def test_card_text_from_the_model_is_escaped(app, chat, fake_model):
    args = {
        "question": f"Pick {XSS}{ATTR_XSS}",
        "options": [
            {"label": f"A {XSS}", "value": f"v{ATTR_XSS}", "description": f"D {XSS}{ATTR_XSS}"},
            {"label": f"B{ATTR_XSS}", "value": "b"},
        ],
        "allow_free_text": True,
    }
    chat_id = pause(chat, fake_model, "ask_user", args, "toolu_ask")
    page = chat.client.get(f"/chats/{chat_id}").get_data(as_text=True)
    section = card_html(page, "toolu_ask")

    assert "<script>alert" not in page
    assert ATTR_XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    found = Elements(section)
    assert not [attrs for _, attrs in found.found if "onmouseover" in attrs]
    # The value still round-trips exactly.
    assert options_of(found, "answer")[0]["value"] == json.dumps(f"v{ATTR_XSS}")
    fake_model.script("Ok.")
    response = post_card(chat, chat_id, "toolu_ask", {"answer": json.dumps(f"v{ATTR_XSS}")})
    assert response.status_code == 200
    answered = response.get_data(as_text=True)
    assert "<script>alert" not in answered and ATTR_XSS not in answered
    resume(app, chat, fake_model, chat_id)
    assert json.loads(tool_result_sent(fake_model, "toolu_ask")) == {"value": f"v{ATTR_XSS}"}


# --- the partial and the parsing, without a run ----------------------------------------


def _render(app, card, **state):
    with app.test_request_context():
        from flask import g

        if state:
            g.card_state = {"toolUseId": card["toolUseId"], **state}
        return render_template(
            "chat/_card.html", row={"sequence": 7, "card": card}, conversation_id=3
        )


def _single(**extra) -> dict:
    card = {
        "toolUseId": "toolu_x",
        "tool": "select_ad_format",
        "status": "awaiting",
        "kind": "questionnaire",
        "title": "Which format?",
        "submitLabel": "Choose",
        "resultKey": "value",
        "steps": [
            {
                "id": "format",
                "title": "Ad format",
                "input": "single",
                "options": [
                    {"label": "One", "value": 1},
                    {"label": "True", "value": True},
                    {"label": "Evil", "value": "x", "thumbnail": "javascript:alert(1)"},
                ],
                "required": True,
                "allowFreeText": False,
                "maxLength": 2000,
                "placeholder": "",
            }
        ],
    }
    card.update(extra)
    return card


def test_values_map_back_strictly():
    card = _single()
    assert parse_answer(card, MultiDict({"format": "1"})).result == {"value": 1}
    assert parse_answer(card, MultiDict({"format": "true"})).result == {"value": True}
    assert parse_answer(card, MultiDict({"format": "1.0"})).errors
    assert parse_answer(card, MultiDict({"format": '"1"'})).errors
    assert parse_answer(card, MultiDict({})).errors == {"format": "“Ad format” needs an answer."}


def test_only_same_site_thumbnails_are_shown(app):
    markup = _render(app, _single())
    assert "javascript:" not in markup and "<img" not in markup


def test_answered_and_dismissed_cards_are_read_only(app):
    answered = _render(app, _single(status="answered", answer={"value": True}))
    assert "<form" not in answered and "csrf_token" not in answered
    assert 'data-status="answered"' in answered and ">True<" in answered
    skipped = _render(app, _single(status="dismissed", answer={"dismissed": True}))
    assert "<form" not in skipped and "Skipped" in skipped


def test_a_card_level_error_is_an_alert_tied_to_the_form(app):
    markup = _render(app, _single(), error="A reply is already being written.", errors={})
    found = Elements(markup)
    assert found.one("p", id="card-toolu_x-error")["role"] == "alert"
    assert found.one("form")["aria-describedby"] == "card-toolu_x-error"


def test_confirmation_cards_use_the_same_partial(app):
    card = {
        "toolUseId": "toolu_gate",
        "tool": "generate_image",
        "kind": "confirmation",
        "status": "awaiting",
        "arguments": {"prompt": XSS},
        "reason": "The prompt came from a fetched page.",
    }
    markup = _render(app, card)
    found = Elements(markup)
    assert found.one("button", name="approved", value="true")["type"] == "submit"
    assert found.one("button", name="approved", value="false")
    assert "<script>alert" not in markup and "&lt;script&gt;" in markup
    assert parse_confirmation(MultiDict({"approved": "true"})) == {"approved": True}
    assert parse_confirmation(MultiDict({"approved": "false"})) == {"approved": False}
    assert parse_confirmation(MultiDict({"approved": "yes"})) is None
    declined = _render(app, {**card, "status": "answered", "answer": {"approved": False}})
    assert "Declined" in declined and "<form" not in declined


def test_card_view_summary_for_multi_step_answers(app):
    card = {
        "toolUseId": "t",
        "tool": "configure_video",
        "status": "answered",
        "resultKey": None,
        "title": "Video",
        "steps": [
            {
                "id": "duration",
                "title": "Duration",
                "input": "single",
                "options": [{"label": "6 seconds", "value": 6}],
            },
            {"id": "script", "title": "Script", "input": "text", "options": []},
        ],
        "answer": {"answers": {"duration": 6, "script": "Hi"}},
    }
    with app.test_request_context():
        assert card_view(card)["summary"] == [
            {"title": "Duration", "answers": ["6 seconds"]},
            {"title": "Script", "answers": ["Hi"]},
        ]


def test_a_plain_post_for_an_unknown_card_is_a_409_page(app, chat, fake_model, workspace):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    response = post_card(chat, chat_id, "toolu_other", {"dismiss": "1"}, htmx=False)
    assert response.status_code == 409
    assert "not waiting for an answer" in response.get_data(as_text=True)
    assert_still_awaiting(chat, chat_id, "toolu_offer")


def test_a_plain_post_for_an_answered_card_shows_the_page_with_the_message(
    app, chat, fake_model, workspace
):
    chat_id = pause(chat, fake_model, "select_offer", {}, "toolu_offer")
    fake_model.script("Done.")
    post_card(chat, chat_id, "toolu_offer", {"offer": value(workspace["calm"])})
    resume(app, chat, fake_model, chat_id)
    response = post_card(chat, chat_id, "toolu_offer", {"dismiss": "1"}, htmx=False)
    assert response.status_code == 409
    section = card_html(response.get_data(as_text=True), "toolu_offer")
    assert 'data-status="answered"' in section and "not waiting for an answer" in section
