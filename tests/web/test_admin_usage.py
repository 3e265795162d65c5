"""Admin usage: credits, replies and billable tool calls per person and month, and each
person's monthly credit allowance (blank is unlimited), set through a CSRF-protected form."""

from __future__ import annotations

import html
import re

import pytest

from app.accounts.models import User
from app.billing.models import UsageEvent
from app.billing.quota import month_of
from tests.web.helpers import (
    alerts,
    assert_redirects_to_login,
    bearer,
    fetch,
    json_error,
    redirect_path,
    snapshot,
)

EARLIER = "2025-12"


@pytest.fixture
def admin(auth):
    user_id = auth.create("root@example.com", admin=True)
    auth.login("root@example.com")
    return user_id


def _event(app, user_id, key, credits, billable=0, month=None):
    with app.extensions["database"].session() as session:
        session.add(
            UsageEvent(
                idempotency_key=key,
                user_id=user_id,
                model="claude-sonnet-5-5",
                billable_tool_calls=billable,
                credits=credits,
                month=month or month_of(),
            )
        )
        session.commit()


@pytest.fixture
def bob_usage(app, bob):
    """Bob's replies: two this month (one with a billable tool call), three in December."""
    _event(app, bob["id"], "1:chat:0", 3, billable=1)
    _event(app, bob["id"], "1:chat:1", 2)
    for n in range(3):
        _event(app, bob["id"], f"old:chat:{n}", 4, billable=2, month=EARLIER)
    return bob


def _cells(page: str, row_id: str) -> list[str]:
    row = re.search(rf'<tr id="{row_id}">(.*?)</tr>', page, re.S)
    assert row, f"no row {row_id}"
    cells = re.findall(r"<td>(.*?)</td>", row.group(1), re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in cells]


def test_admin_sees_usage_per_person_this_month(client, admin, bob_usage):
    page = client.get("/admin/usage").get_data(as_text=True)

    assert f"Usage in {month_of()} (this month)" in page
    bob_id = bob_usage["id"]
    # Person, credits, allowance, replies, billable tool calls.
    assert _cells(page, f"usage-{bob_id}")[:5] == ["bob@example.com", "5", "unlimited", "2", "1"]
    assert _cells(page, f"usage-{admin}")[:5] == ["root@example.com", "0", "unlimited", "0", "0"]
    assert f'<option value="{EARLIER}"' in page, "earlier months can be chosen"


def test_admin_sees_an_earlier_month(client, admin, bob_usage):
    page = client.get(f"/admin/usage?month={EARLIER}").get_data(as_text=True)
    assert f"Usage in {EARLIER}" in page and "(this month)</h1>" not in page
    assert _cells(page, f"usage-{bob_usage['id']}")[:5] == [
        "bob@example.com",
        "12",
        "unlimited",
        "3",
        "6",
    ]


def test_a_persons_usage_month_by_month(client, admin, bob_usage):
    page = client.get(f"/admin/users/{bob_usage['id']}/usage").get_data(as_text=True)
    assert "Usage of bob@example.com" in page
    assert _cells(page, f"month-{month_of()}") == [f"{month_of()} (this month)", "5", "2", "1"]
    assert _cells(page, f"month-{EARLIER}") == [EARLIER, "12", "3", "6"]
    assert "Unlimited." in page


@pytest.mark.parametrize("month", ["2025-13", "25-11", "2025-1", "latest", "2025-11-01"])
def test_a_malformed_month_is_400(client, admin, month):
    response = client.get(f"/admin/usage?month={month}")
    assert response.status_code == 400
    assert "A month looks like" in response.get_data(as_text=True)


def test_admin_sets_and_clears_an_allowance(app, client, auth, admin, bob_usage):
    bob_id = bob_usage["id"]
    response = client.post(
        f"/admin/users/{bob_id}/allowance", data={"monthly_credits": "50", "csrf_token": auth.csrf}
    )
    assert redirect_path(response) == f"/admin/users/{bob_id}/usage"
    assert fetch(app, User, bob_id).monthly_credits == 50
    page = client.get(f"/admin/users/{bob_id}/usage").get_data(as_text=True)
    assert "bob@example.com now has 50 credits a month." in page
    assert "50 credits a month." in page and 'value="50"' in page
    overview = client.get("/admin/usage").get_data(as_text=True)
    assert _cells(overview, f"usage-{bob_id}")[2] == "50 (45 left)"

    response = client.post(
        f"/admin/users/{bob_id}/allowance", data={"monthly_credits": "", "csrf_token": auth.csrf}
    )
    assert redirect_path(response) == f"/admin/users/{bob_id}/usage"
    assert fetch(app, User, bob_id).monthly_credits is None
    assert "now has unlimited credits" in client.get(response.headers["Location"]).get_data(
        as_text=True
    )


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", "10000001"])
def test_a_bad_allowance_is_refused_and_changes_nothing(app, client, auth, admin, bob, value):
    before = snapshot(app)
    response = client.post(
        f"/admin/users/{bob['id']}/allowance",
        data={"monthly_credits": value, "csrf_token": auth.csrf},
    )
    assert response.status_code == 400
    assert alerts(response), "the form says what is wrong"
    assert snapshot(app) == before


def test_the_allowance_form_needs_its_csrf_token(app, client, admin, bob):
    before = snapshot(app)
    response = client.post(f"/admin/users/{bob['id']}/allowance", data={"monthly_credits": "5"})
    assert response.status_code == 400
    assert snapshot(app) == before


def test_an_unknown_person_is_404(client, auth, admin):
    assert client.get("/admin/users/999999/usage").status_code == 404
    response = client.post(
        "/admin/users/999999/allowance", data={"monthly_credits": "5", "csrf_token": auth.csrf}
    )
    assert response.status_code == 404


def test_only_admins(app, client, auth, bob):
    ada = auth.create()
    auth.login()
    before = snapshot(app)
    assert client.get("/admin/usage").status_code == 403
    assert client.get(f"/admin/users/{ada}/usage").status_code == 403
    assert client.get(f"/admin/users/{bob['id']}/usage").status_code == 403
    response = client.post(
        f"/admin/users/{ada}/allowance", data={"monthly_credits": "", "csrf_token": auth.csrf}
    )
    assert response.status_code == 403
    # A script with a bearer token is no admin either.
    response = client.post(
        f"/admin/users/{bob['id']}/allowance",
        data={"monthly_credits": "999"},
        headers=bearer(bob["raw_token"]),
    )
    assert response.status_code == 403
    assert snapshot(app) == before


def test_logged_out_goes_to_login(app):
    client = app.test_client()
    assert_redirects_to_login(client.get("/admin/usage"))


def test_the_admin_nav_links_usage(client, admin, bob):
    for page in ("/admin/users", "/admin/guidelines", "/admin/usage"):
        assert 'href="/admin/usage"' in client.get(page).get_data(as_text=True), page


def test_an_allowance_set_here_refuses_the_persons_next_message(client, auth, admin, bob_usage):
    """Bob has used 5 credits this month; an allowance of 5 stops him at once."""
    client.post(
        f"/admin/users/{bob_usage['id']}/allowance",
        data={"monthly_credits": "5", "csrf_token": auth.csrf},
    )
    bob_client = client.application.test_client()
    response = bob_client.post(
        f"/api/chats/{bob_usage['conversation']}/loop",
        json={"message": "hello"},
        headers=bearer(bob_usage["raw_token"]),
    )
    assert json_error(response, 402) == "QUOTA_EXCEEDED"
