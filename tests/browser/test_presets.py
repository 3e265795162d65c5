"""Presets as a person meets them: made in Settings with the keyboard (in place), offered
in the sidebar, a chat started from one shows its name in the header, and its starter
prompts fill the composer, ready to edit or send, which starts the chat from the preset."""

from __future__ import annotations

from sqlalchemy import select

from app.chat.models import Conversation
from app.chat.preset_models import Preset
from tests.browser.helpers import log_in, wait_until
from tests.fake_model import Turn, text


def test_a_preset_made_in_settings_starts_a_chat_whose_starters_fill_the_composer(
    page, live_server, person, fake_model, live_app
):
    log_in(page, live_server)
    page.goto(f"{live_server.url}/settings#presets-heading")
    page.fill("#preset-new-name", "Launch posts")
    page.fill("#preset-new-instructions", "Short and warm.")
    page.fill("#preset-new-starters", "Draft three posts for the launch\nA teaser for next week")
    page.focus("#preset-form-new button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_selector(".preset h3:has-text('Launch posts')")
    assert page.url.endswith("/settings#presets-heading")  # swapped in place, no reload
    wait_until(page, "document.activeElement.id === 'presets-heading'")
    # Editing by the keyboard: the form opens in place with its name focused.
    page.focus(".preset a:has-text('Edit')")
    page.keyboard.press("Enter")
    wait_until(page, "document.activeElement.name === 'name'")
    page.keyboard.press("Escape")
    page.fill(".preset .preset-form input[name=name]", "   ")  # (empty: the browser refuses)
    page.focus(".preset .preset-form button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_selector(".preset-form [role=alert]:has-text('A preset needs a name.')")
    wait_until(page, "document.activeElement.name === 'name'")
    page.keyboard.press("Control+a")
    page.keyboard.type("Launch posts")
    page.keyboard.press("Enter")
    page.wait_for_selector(".preset h3:has-text('Launch posts')")
    with live_app.extensions["database"].session() as session:
        preset_id = session.scalars(select(Preset.id)).one()

    # The chat list offers it; the new chat names it in its header.
    page.goto(f"{live_server.url}/chats/new")
    page.click("#preset-menu summary")
    page.click(f"#preset-menu a[href='/chats/new?preset={preset_id}']")
    page.wait_for_selector("#chat-preset")
    page.wait_for_load_state("load")  # the starters' buttons work once its scripts ran
    assert page.inner_text("#chat-preset").endswith("Launch posts")

    # A starter fills the box (not sent), the person edits and sends it.
    page.click("#preset-starters button:has-text('A teaser for next week')")
    assert page.input_value("#composer-input") == "A teaser for next week"
    assert page.evaluate("document.activeElement.id") == "composer-input"
    page.keyboard.type(", for Instagram")
    fake_model.script(Turn(text("Here is a teaser.")))
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/chats/*")
    page.locator("#rows .row-host", has_text="Here is a teaser.").wait_for(timeout=30_000)
    assert page.inner_text("#chat-preset").endswith("Launch posts")
    assert not page.is_visible("#preset-starters")
    with live_app.extensions["database"].session() as session:
        chat = session.scalars(select(Conversation)).one()
        assert chat.preset_id == preset_id
    first = fake_model.requests[0]
    assert first["messages"][0]["content"][-1]["text"].endswith(
        "A teaser for next week, for Instagram"
    ) or "A teaser for next week, for Instagram" in str(first["messages"][0])
    assert "Short and warm." in str(first["system"])
