"""The mails' words: each a subject, a plain-text body and a simple HTML one. Names given
by people (an inviter, a project) are escaped in the HTML."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class Letter:
    subject: str
    text: str
    html: str


def _html(paragraphs: list[str], link: str, link_label: str) -> str:
    """Paragraphs (already escaped) around one button-like link, then the link written out."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    href = escape(link, quote=True)
    return (
        '<!doctype html><html><body style="font-family: sans-serif; line-height: 1.5">'
        f"{body}"
        f'<p><a href="{href}" style="font-weight: bold">{escape(link_label)}</a></p>'
        f'<p style="color: #555">Or paste this address into your browser:<br>{escape(link)}</p>'
        "</body></html>"
    )


def password_reset(link: str) -> Letter:
    text = (
        "Someone (we hope you) asked to set a new password for your Loopdesk account.\n\n"
        f"Set a new password here (the link works once, for an hour):\n{link}\n\n"
        "If it was not you, ignore this mail: your password stays as it is.\n"
    )
    html = _html(
        [
            "Someone (we hope you) asked to set a new password for your Loopdesk account.",
            "The link works once, for an hour. If it was not you, ignore this mail: your "
            "password stays as it is.",
        ],
        link,
        "Set a new password",
    )
    return Letter("Set a new Loopdesk password", text, html)


def address_confirmation(link: str) -> Letter:
    text = (
        "Welcome to Loopdesk. Confirm that this address is yours (the link works for a "
        f"day):\n{link}\n\n"
        "If you did not make a Loopdesk account, ignore this mail.\n"
    )
    html = _html(
        [
            "Welcome to Loopdesk. Confirm that this address is yours (the link works for a day).",
            "If you did not make a Loopdesk account, ignore this mail.",
        ],
        link,
        "Confirm my address",
    )
    return Letter("Confirm your Loopdesk address", text, html)


def invitation(inviter_name: str, project_name: str, accept_url: str) -> Letter:
    text = (
        f'{inviter_name} invites you to the project "{project_name}" on Loopdesk.\n\n'
        f"Accept the invitation here:\n{accept_url}\n\n"
        "If you do not know them, ignore this mail.\n"
    )
    html = _html(
        [
            f"{escape(inviter_name)} invites you to the project "
            f"<strong>{escape(project_name)}</strong> on Loopdesk.",
            "If you do not know them, ignore this mail.",
        ],
        accept_url,
        "Accept the invitation",
    )
    return Letter(f'{inviter_name} invites you to "{project_name}" on Loopdesk', text, html)


def added_to_project(inviter_name: str, project_name: str, project_url: str) -> Letter:
    text = (
        f'{inviter_name} added you to the project "{project_name}" on Loopdesk.\n\n'
        f"See it and its members here:\n{project_url}\n"
    )
    html = _html(
        [
            f"{escape(inviter_name)} added you to the project "
            f"<strong>{escape(project_name)}</strong> on Loopdesk."
        ],
        project_url,
        "Open the project",
    )
    return Letter(f'{inviter_name} added you to "{project_name}" on Loopdesk', text, html)
