"""Password reset and address confirmation by mail, end to end: the mail a real SMTP
server received, its link followed with the test client."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from sqlalchemy import update

from app.accounts.email_tokens import EmailToken
from app.accounts.models import User
from app.db import utcnow
from tests.factories import PASSWORD, AuthActions, add_conversation, csrf_token_from
from tests.mail.smtp_server import link_in
from tests.web.helpers import anonymous_csrf, assert_redirects_to_login, json_error, redirect_path

NEW_PASSWORD = "violet lantern harbour 42"
LINK_GONE = "This link no longer works"


@pytest.fixture
def mail_app(make_app, smtp):
    return make_app(smtp_url=smtp.url, public_url="https://chat.example.com")


def _forgot(client, email="ada@example.com"):
    return client.post("/forgot", data={"email": email, "csrf_token": anonymous_csrf(client)})


def _reset(client, path, password=NEW_PASSWORD, confirm=None):
    token = csrf_token_from(client.get(path).get_data(as_text=True))
    data = {"new_password": password, "confirm": confirm or password, "csrf_token": token}
    return client.post(path, data=data)


def _login_status(app, password, email="ada@example.com") -> int:
    client = app.test_client()
    data = {"email": email, "password": password, "csrf_token": anonymous_csrf(client)}
    return client.post("/login", data=data).status_code


def _settle(app) -> None:
    """Every mail handed over is sent (or failed): nothing more will arrive."""
    app.extensions["mailer"].close(wait=True)


def test_a_reset_sets_the_password_and_ends_every_session(mail_app, smtp):
    app = mail_app
    AuthActions(app, app.test_client()).create()
    other_device = app.test_client()
    AuthActions(app, other_device).login()
    client = app.test_client()
    assert "Forgot your password?" in client.get("/login").get_data(as_text=True)

    asked = _forgot(client)
    assert asked.status_code == 200
    assert "If <strong>ada@example.com</strong> has an account" in asked.get_data(as_text=True)
    [mail] = smtp.wait_for(1)
    assert mail["To"] == "ada@example.com" and mail["Subject"] == "Set a new Loopdesk password"
    link = urlsplit(link_in(mail))
    assert f"{link.scheme}://{link.netloc}" == "https://chat.example.com"
    assert re.fullmatch(r"/reset/[A-Za-z0-9_-]{40,}", link.path)

    page = client.get(link.path).get_data(as_text=True)
    assert "Set a new password" in page and "ada@example.com" in page
    weak = _reset(client, link.path, password="password123")  # signup's rules hold here
    assert weak.status_code == 400 and "Try a longer phrase" in weak.get_data(as_text=True)
    assert redirect_path(_reset(client, link.path)) == "/login"
    assert "Your new password is set" in client.get("/login").get_data(as_text=True)

    assert _login_status(app, PASSWORD) == 400
    assert _login_status(app, NEW_PASSWORD) == 302
    assert_redirects_to_login(other_device.get("/settings"))
    # Single use: the link now says it no longer works, and offers a new one.
    again = client.get(link.path)
    assert again.status_code == 404 and LINK_GONE in again.get_data(as_text=True)
    assert 'href="/forgot"' in again.get_data(as_text=True)
    assert _reset(client, link.path, password="another fine phrase 7").status_code == 404
    assert _login_status(app, NEW_PASSWORD) == 302


def test_an_unknown_email_gets_the_same_answer_and_no_mail(mail_app, smtp):
    app = mail_app
    AuthActions(app, app.test_client()).create()
    unknown = _forgot(app.test_client(), "nobody@example.com").get_data(as_text=True)
    known = _forgot(app.test_client(), "ada@example.com").get_data(as_text=True)
    scrub = re.compile(r'name="csrf_token"[^>]*|"X-CSRFToken": "[^"]+"')
    assert scrub.sub("", unknown).replace("nobody@", "ada@") == scrub.sub("", known)
    _settle(app)
    assert [mail["To"] for mail in smtp.mails] == ["ada@example.com"]


def test_a_slow_mail_server_never_holds_the_page(mail_app, smtp):
    AuthActions(mail_app, mail_app.test_client()).create()
    smtp.answering.clear()
    try:
        assert _forgot(mail_app.test_client()).status_code == 200
        assert smtp.mails == []  # answered while the server still holds the mail
    finally:
        smtp.answering.set()
    assert smtp.wait_for(1)[0]["To"] == "ada@example.com"


def test_an_invitation_is_mailed_with_its_link(mail_app, smtp):
    from app.web.mailing import send_invitation

    with mail_app.test_request_context():
        sent = send_invitation("grace@example.com", "Ada", "Launch", "https://x.example/i/abc")
    assert sent.result(timeout=10) is True
    [mail] = smtp.wait_for(1)
    assert mail["Subject"] == 'Ada invites you to "Launch" on Loopdesk'
    assert link_in(mail) == "https://x.example/i/abc"


def test_an_expired_link_no_longer_works(mail_app, smtp, db):
    app = mail_app
    AuthActions(app, app.test_client()).create()
    client = app.test_client()
    _forgot(client)
    path = urlsplit(link_in(smtp.wait_for(1)[0])).path
    db.execute(update(EmailToken).values(expires_at=utcnow() - timedelta(seconds=1)))
    db.commit()
    gone = client.get(path)
    assert gone.status_code == 404 and LINK_GONE in gone.get_data(as_text=True)
    assert client.get("/reset/not-a-token-of-ours").status_code == 404
    assert _login_status(app, PASSWORD) == 302


def test_asking_too_often_for_one_address_is_refused(make_app, smtp):
    app = make_app(smtp_url=smtp.url, rate_limit_mail="2 per hour")
    client = app.test_client()
    for _ in range(2):
        assert _forgot(client, "nobody@example.com").status_code == 200
    assert _forgot(app.test_client(), "nobody@example.com").status_code == 429


def test_without_smtp_the_reset_mail_is_in_the_log_and_its_link_works(app, auth, caplog):
    caplog.set_level(logging.INFO, logger="app.mail")
    auth.create()
    client = app.test_client()
    _forgot(client)
    logged = re.search(r"http://localhost(/reset/\S+)", caplog.text)
    assert logged and "To: ada@example.com" in caplog.text
    assert redirect_path(_reset(client, logged.group(1))) == "/login"
    assert _login_status(app, NEW_PASSWORD) == 302


def test_an_admin_copies_a_reset_link_from_the_people_page(mail_app, smtp):
    app = mail_app
    admin = AuthActions(app, app.test_client())
    admin.create("root@example.com", admin=True)
    ada = admin.create()
    admin.login("root@example.com")
    page = admin.client.get("/admin/users").get_data(as_text=True)
    assert f'action="/admin/users/{ada}/reset-link"' in page
    shown = admin.client.post(f"/admin/users/{ada}/reset-link", data={"csrf_token": admin.csrf})
    html = shown.get_data(as_text=True)
    assert shown.status_code == 200 and "for ada@example.com" in html
    link = re.search(r'id="reset-link" type="text" readonly value="([^"]+)"', html).group(1)
    assert "/reset/" not in admin.client.get("/admin/users").get_data(as_text=True)  # once
    client = app.test_client()
    assert redirect_path(_reset(client, urlsplit(link).path)) == "/login"
    assert _login_status(app, NEW_PASSWORD) == 302
    _settle(app)
    assert smtp.mails == []  # handed over by the admin, not mailed
    assert (
        admin.client.post(
            "/admin/users/999/reset-link", data={"csrf_token": admin.csrf}
        ).status_code
        == 404
    )


def _signup(client, email="new@example.com"):
    data = {
        "email": email,
        "password": NEW_PASSWORD,
        "confirm": NEW_PASSWORD,
        "csrf_token": anonymous_csrf(client),
    }
    assert client.post("/signup", data=data).status_code == 302


def _new_chat_loop(client, app, email="new@example.com"):
    with app.extensions["database"].session() as session:
        user_id = session.query(User.id).filter_by(email=email).scalar()
    chat = add_conversation(app, user_id)
    csrf = csrf_token_from(client.get("/settings").get_data(as_text=True))
    return client.post(
        f"/api/chats/{chat}/loop", json={"message": "Hi"}, headers={"X-CSRFToken": csrf}
    )


def test_with_verify_email_a_new_account_confirms_its_address_before_chatting(make_app, smtp):
    app = make_app(smtp_url=smtp.url, verify_email=True)
    client = app.test_client()
    _signup(client)
    [first] = smtp.wait_for(1)
    assert first["To"] == "new@example.com"
    assert first["Subject"] == "Confirm your Loopdesk address"
    page = client.get("/settings").get_data(as_text=True)
    assert 'id="address-unconfirmed"' in page and "Send the link again" in page
    assert json_error(_new_chat_loop(client, app), 403) == "EMAIL_UNCONFIRMED"

    csrf = csrf_token_from(page)
    assert redirect_path(client.post("/verify/send", data={"csrf_token": csrf})) == "/"
    second = smtp.wait_for(2)[1]
    assert redirect_path(client.get(urlsplit(link_in(second)).path)) == "/"
    assert 'id="address-unconfirmed"' not in client.get("/settings").get_data(as_text=True)
    assert _new_chat_loop(client, app).status_code == 202
    # Used: both links now say so (confirming used up the earlier one too).
    for mail in (first, second):
        gone = client.get(urlsplit(link_in(mail)).path)
        assert gone.status_code == 404 and LINK_GONE in gone.get_data(as_text=True)


def test_with_verify_email_off_a_new_account_chats_at_once_and_gets_no_mail(mail_app, smtp):
    client = mail_app.test_client()
    _signup(client)
    assert 'id="address-unconfirmed"' not in client.get("/settings").get_data(as_text=True)
    assert _new_chat_loop(client, mail_app).status_code == 202
    _settle(mail_app)
    assert smtp.mails == []


def test_accounts_an_admin_makes_count_as_confirmed(make_app, smtp):
    app = make_app(smtp_url=smtp.url, verify_email=True)
    auth = AuthActions(app, app.test_client())
    auth.create()
    auth.login()
    assert 'id="address-unconfirmed"' not in auth.client.get("/settings").get_data(as_text=True)
    assert _new_chat_loop(auth.client, app, "ada@example.com").status_code == 202


def test_an_account_made_by_flask_create_user_counts_as_confirmed(make_app, smtp):
    app = make_app(smtp_url=smtp.url, verify_email=True)
    args = ["create-user", "grace@example.com", "--password", NEW_PASSWORD]
    assert app.test_cli_runner().invoke(args=args).exit_code == 0
    client = app.test_client()
    AuthActions(app, client).login("grace@example.com", NEW_PASSWORD)
    assert _new_chat_loop(client, app, "grace@example.com").status_code == 202
