"""Sending mail through a real SMTP server, writing it to the log without one, and never
letting the server's password out."""

from __future__ import annotations

import logging

import pytest

from app.config import load_settings
from app.mail.letters import invitation
from app.mail.sender import Mailer, scrubbed
from tests.mail.smtp_server import link_in, smtp_server, text_of

SECRET = "s3cret-Passw0rd"


def _mailer(tmp_path, smtp_url: str | None = None) -> Mailer:
    return Mailer(
        load_settings({"instance_path": tmp_path, "secret_key": "k", "smtp_url": smtp_url}, env={})
    )


def test_an_invitation_arrives_with_its_sender_subject_link_and_html(tmp_path, smtp):
    mailer = _mailer(tmp_path, smtp.url)
    letter = invitation("Ada <b>", "Launch & co", "https://chat.example.com/invitations/abc")
    sent = mailer.send("grace@example.com", letter.subject, letter.text, letter.html)
    assert sent.result(timeout=10) is True
    [mail] = smtp.wait_for(1)
    mailer.close()
    assert mail["To"] == "grace@example.com"
    assert mail["From"] == "loopdesk@localhost"
    assert mail["Subject"] == 'Ada <b> invites you to "Launch & co" on Loopdesk'
    assert link_in(mail) == "https://chat.example.com/invitations/abc"
    html = mail.get_body(preferencelist=("html",)).get_content()
    assert "Ada &lt;b&gt;" in html and "Launch &amp; co" in html
    assert 'href="https://chat.example.com/invitations/abc"' in html


def test_without_smtp_the_whole_mail_is_written_to_the_log(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="app.mail")
    letter = invitation("Ada", "Launch", "http://localhost:5000/invitations/abc")
    sent = _mailer(tmp_path).send("grace@example.com", letter.subject, letter.text, letter.html)
    assert sent.result() is False
    assert "To: grace@example.com" in caplog.text
    assert 'Subject: Ada invites you to "Launch" on Loopdesk' in caplog.text
    assert "http://localhost:5000/invitations/abc" in caplog.text


def test_a_refused_login_is_logged_without_the_password(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with smtp_server(refuse_logins=True) as (url, inbox):
        with_login = url.replace("smtp://", f"smtp://mailer:{SECRET}@")
        mailer = _mailer(tmp_path, with_login)
        assert mailer.send("grace@example.com", "Hello", "Hi").result(timeout=10) is False
        mailer.close()
    assert inbox.mails == []
    assert "mail to grace@example.com (Hello) not sent: SMTPAuthenticationError" in caplog.text
    assert SECRET not in caplog.text


def test_a_password_a_server_echoes_back_is_scrubbed_in_every_form():
    from urllib.parse import urlsplit

    server = urlsplit(f"smtp://mailer:{SECRET}@mail.example.com:587")
    echoed = "535 bad AUTH PLAIN AG1haWxlcgBzM2NyZXQtUGFzc3cwcmQ= (s3cret-Passw0rd)"
    assert SECRET not in scrubbed(echoed, server)
    assert "AG1haWxlcgBzM2NyZXQtUGFzc3cwcmQ=" not in scrubbed(echoed, server)


def test_a_bad_smtp_url_is_refused_without_repeating_it(tmp_path):
    with pytest.raises(ValueError) as refused:
        load_settings({"instance_path": tmp_path}, env={"SMTP_URL": f"smtp://u:{SECRET}@host:x"})
    assert "SMTP_URL" in str(refused.value)
    assert SECRET not in str(refused.value)


def test_the_sender_defaults_to_the_public_host(tmp_path, smtp):
    settings = load_settings(
        {"instance_path": tmp_path, "secret_key": "k", "smtp_url": smtp.url},
        env={"PUBLIC_URL": "https://chat.example.com"},
    )
    mailer = Mailer(settings)
    assert mailer.send("grace@example.com", "Hi", "Hello").result(timeout=10)
    mailer.close()
    assert smtp.wait_for(1)[0]["From"] == "loopdesk@chat.example.com"
    assert "Hello" in text_of(smtp.mails[0])


def test_a_server_that_never_answers_is_given_up_on_after_the_timeout(tmp_path, caplog):
    import socket

    with socket.socket() as silent:  # accepts connections (the backlog), never speaks
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        settings = load_settings(
            {
                "instance_path": tmp_path,
                "secret_key": "k",
                "smtp_url": f"smtp://127.0.0.1:{port}",
                "mail_timeout_seconds": 1,
            },
            env={},
        )
        mailer = Mailer(settings)
        assert mailer.send("grace@example.com", "Hello", "Hi").result(timeout=30) is False
        mailer.close()
    assert "mail to grace@example.com (Hello) not sent:" in caplog.text
    assert "timed out" in caplog.text
