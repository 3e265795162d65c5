"""An owner's Projects page by keyboard, on a phone: make a project, invite an account and
an address without one (its link to copy, mail being off), change a role and remove a
member (htmx swapping the members in place), with axe and no sideways scrolling."""

from __future__ import annotations

import re

from tests.browser.helpers import audit, log_in, wait_until
from tests.factories import add_user

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


# The last press's request and swap are over before the next press (htmx wires swapped
# content as it settles, at once since its settle delay is 0: see the last test).
SETTLED = "!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')"


def _press(page, selector: str, key: str = "Enter") -> None:
    wait_until(page, SETTLED)
    page.focus(selector)
    page.keyboard.press(key)


def test_an_owner_runs_a_project_by_keyboard(browser, live_server, live_app, person):
    bob_id = add_user(live_app, "bob@example.com")
    page = browser.new_context(**PHONE).new_page()
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    log_in(page, live_server)

    # From Settings to Projects, then a new project.
    page.goto(f"{live_server.url}/settings")
    _press(page, ".settings-nav a[href='/settings/projects']")
    page.wait_for_url(f"{live_server.url}/settings/projects")
    page.focus("#project-name")
    page.keyboard.type("Launch team")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/settings/projects/\d+$"))
    assert page.inner_text("h1") == "Launch team"

    # Invite Bob (an account: he joins at once) as a viewer, the role chosen by typing.
    page.focus("#invite-email")
    page.keyboard.type("bob@example.com")
    page.focus("#invite-role")
    page.keyboard.type("v")
    assert page.eval_on_selector("#invite-role", "el => el.value") == "viewer"
    page.keyboard.press("Tab")  # to the Invite button
    page.keyboard.press("Enter")
    page.wait_for_selector("#members .saved:has-text('bob@example.com is a member now')")
    assert page.eval_on_selector(f"#role-{bob_id}", "el => el.value") == "viewer"

    # An address without an account: mail is off, so the link to copy.
    page.focus("#invite-email")
    page.keyboard.type("carol@example.com")
    page.keyboard.press("Enter")
    link = page.wait_for_selector("#invitation-link").inner_text()
    # A plain form's answer is a new page: its forms post through htmx once it has loaded
    # (a press before then posts as a form, and the notice is a flash instead).
    page.wait_for_load_state("load")
    assert re.fullmatch(rf"{re.escape(live_server.url)}/invitations/[A-Za-z0-9_-]{{43}}", link)
    assert page.is_visible("button[data-copy-of=invitation-link]")
    assert page.locator("#members li", has_text="carol@example.com").count() == 1

    # Bob becomes an editor: the members swap in place, the focus stays on his role.
    page.focus(f"#role-{bob_id}")
    page.keyboard.type("e")
    _press(page, f"#role-save-{bob_id}")
    page.wait_for_selector("#members .saved:has-text('bob@example.com is editor now')")
    assert page.eval_on_selector(f"#role-{bob_id}", "el => el.value") == "editor"
    assert audit(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 390

    # The last owner stays one: the refusal shows in the members, nothing changed (the
    # console reports the 409, as a browser does, and nothing else).
    assert errors == [], errors
    ada_id = person[2]
    page.focus(f"#role-{ada_id}")
    page.keyboard.type("v")
    _press(page, f"#role-save-{ada_id}")
    page.wait_for_selector("#members .error:has-text('A project keeps at least one owner')")
    assert page.eval_on_selector(f"#role-{ada_id}", "el => el.value") == "owner"
    assert errors and all("409" in error for error in errors), errors
    errors.clear()

    # Removed behind a disclosure that asks first.
    _press(page, f"#member-{bob_id} summary")
    page.wait_for_selector(f"#remove-{bob_id}", state="visible")
    _press(page, f"#remove-{bob_id}")
    page.wait_for_selector("#members .saved:has-text('bob@example.com is no longer a member')")
    assert page.locator(f"#member-{bob_id}").count() == 0
    wait_until(page, "document.querySelector('#members') !== null")
    assert errors == [], errors


def test_a_button_swapped_in_works_from_its_first_moment(browser, live_server, live_app, person):
    """A press right after a swap goes through htmx (htmx wires swapped content as it
    settles, which it once did 20 ms later: a press then posted as a plain form)."""
    from app.accounts.projects import add_member, create_project

    bob_id = add_user(live_app, "bob@example.com")
    with live_app.extensions["database"].session() as session:
        project = create_project(session, person[2], "Launch team")
        add_member(session, project.id, person[2], "bob@example.com", "viewer")
        session.commit()
    page = browser.new_context().new_page()
    page.set_default_timeout(10_000)
    log_in(page, live_server)
    page.goto(f"{live_server.url}/settings/projects/{project.id}")
    page.evaluate(
        """bob => {
          window.samePage = true;
          document.body.addEventListener('htmx:afterSwap', () => setTimeout(() => {
            document.getElementById('role-' + bob).value = 'viewer';
            document.getElementById('role-save-' + bob).click();
          }, 0), {once: true});
        }""",
        bob_id,
    )
    page.select_option(f"#role-{bob_id}", "editor")
    page.click(f"#role-save-{bob_id}")
    page.wait_for_selector("#members .saved:has-text('bob@example.com is viewer now')")
    assert page.evaluate("window.samePage === true")  # no plain form's new page
