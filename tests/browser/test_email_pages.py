"""The pages mail adds, as a person sees them in a browser (phone light, desktop dark):
the notice an unconfirmed address puts on every page, its "send again" button, the
answer to "Forgot your password?" and the People page showing an admin a reset link;
each axe-clean and without a console error."""

from __future__ import annotations

import pytest

from app.accounts.service import create_user
from tests.browser.helpers import audit, log_in
from tests.factories import PASSWORD

SCREENS = [
    ("light", {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}),
    ("dark", {"viewport": {"width": 1280, "height": 800}}),
]


@pytest.fixture
def live_app(make_app, fake_model):
    """Confirmation on, no SMTP server: mails go to the log."""
    app = make_app(anthropic_base_url=fake_model.base_url, verify_email=True)
    with app.extensions["database"].session() as session:
        create_user(session, "ada@example.com", PASSWORD, verified=False)
        create_user(session, "root@example.com", PASSWORD, is_admin=True)
        session.commit()
    return app


def test_the_unconfirmed_notice_and_the_forgot_answer_pass_axe(live_server, browser):
    for theme, screen in SCREENS:
        context = browser.new_context(color_scheme=theme, **screen)
        page = context.new_page()
        page.set_default_timeout(10_000)
        errors: list[str] = []
        page.on("console", lambda m, e=errors: m.type == "error" and e.append(m.text))
        page.goto(f"{live_server.url}/forgot")
        page.fill("input[name=email]", f"{theme}@example.com")
        page.click("button[type=submit]")
        page.wait_for_selector("#reset-asked")
        assert audit(page) == []
        log_in(page, live_server)
        page.goto(f"{live_server.url}/settings")
        assert page.is_visible("#address-unconfirmed")
        assert audit(page) == []
        page.click("#address-unconfirmed button[type=submit]")
        page.wait_for_selector("text=We sent a new link to ada@example.com.")
        assert page.is_visible("#address-unconfirmed")  # until the link is opened
        context.close()
        assert errors == []


def test_the_reset_link_an_admin_copies_is_shown_once_and_passes_axe(live_server, browser):
    for theme, screen in SCREENS:
        context = browser.new_context(color_scheme=theme, **screen)
        page = context.new_page()
        page.set_default_timeout(10_000)
        log_in(page, live_server, email="root@example.com")
        page.goto(f"{live_server.url}/admin/users")
        page.click("button[aria-label='Password reset link for ada@example.com']")
        link = page.input_value("#reset-link")
        assert link.startswith(f"{live_server.url}/reset/")
        assert audit(page) == []
        page.goto(link)
        assert page.is_visible("input[name=new_password]")
        context.close()
