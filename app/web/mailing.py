"""The mails the web sends: a password reset, an address confirmation, an invitation.
Links are absolute: PUBLIC_URL when set (a mail must never point wherever a request's
Host header said), else the request's own origin."""

from __future__ import annotations

from concurrent.futures import Future

from flask import current_app, request, url_for

from app.accounts.email_tokens import RESET, VERIFY, issue_email_token
from app.accounts.models import User
from app.mail import letters
from app.mail.sender import Mailer
from app.web.identity import db_session


def mailer() -> Mailer:
    return current_app.extensions["mailer"]


def absolute_url(endpoint: str, **values) -> str:
    path = url_for(endpoint, **values)
    public = current_app.config["LOOPDESK"].public_url
    return (public or request.host_url.rstrip("/")) + path


def reset_link(user: User) -> str:
    """A new single-use reset link for `user` (its token added to the session: the caller
    commits before the link goes anywhere)."""
    return absolute_url("email_links.reset", token=issue_email_token(db_session(), user, RESET))


def send_letter(to: str, letter: letters.Letter) -> Future[bool]:
    return mailer().send(to, letter.subject, letter.text, letter.html)


def send_password_reset(user: User) -> None:
    link = reset_link(user)
    db_session().commit()
    send_letter(user.email, letters.password_reset(link))


def send_address_confirmation(user: User) -> None:
    link = absolute_url("email_links.verify", token=issue_email_token(db_session(), user, VERIFY))
    db_session().commit()
    send_letter(user.email, letters.address_confirmation(link))


def mail_is_on() -> bool:
    """Whether mails go to an SMTP server (else they are only written to the log)."""
    return mailer().server is not None


def send_invitation(to: str, inviter_name: str, project_name: str, accept_url: str) -> Future[bool]:
    """Invite `to` to a project (the projects' invitations call this once the invitation
    is committed); the future says whether the mail went (False without SMTP_URL: it is
    in the log, and the inviter can copy `accept_url` from the page)."""
    return send_letter(to, letters.invitation(inviter_name, project_name, accept_url))


def send_added_note(to: str, inviter_name: str, project_name: str, project_url: str) -> None:
    """Tell a person with an account that they were added to a project."""
    send_letter(to, letters.added_to_project(inviter_name, project_name, project_url))
