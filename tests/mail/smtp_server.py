"""A real SMTP server for the tests (aiosmtpd, in a thread of its own): it keeps every
mail it receives, parsed, and lets a test wait for them."""

from __future__ import annotations

import asyncio
import re
import threading
from contextlib import contextmanager
from email import message_from_bytes, policy
from email.message import EmailMessage

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from tests.ports import free_port

LINK = re.compile(r"https?://\S+")


class Inbox:
    """What the server received; the aiosmtpd handler appends to it."""

    def __init__(self):
        self.mails: list[EmailMessage] = []
        self._arrived = threading.Condition()
        # Cleared, the server holds every mail's DATA until it is set again (a slow server).
        self.answering = threading.Event()
        self.answering.set()

    async def handle_DATA(self, server, session, envelope):
        if not self.answering.is_set():
            await asyncio.get_running_loop().run_in_executor(None, self.answering.wait, 30)
        mail = message_from_bytes(envelope.original_content, policy=policy.default)
        with self._arrived:
            self.mails.append(mail)  # type: ignore[arg-type]  # policy.default parses EmailMessage
            self._arrived.notify_all()
        return "250 Message accepted for delivery"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[EmailMessage]:
        """The first `count` mails, once they are in (or an assertion after `timeout`)."""
        with self._arrived:
            arrived = self._arrived.wait_for(lambda: len(self.mails) >= count, timeout)
        assert arrived, f"{len(self.mails)} mails arrived, expected {count}"
        return self.mails[:count]


def text_of(mail: EmailMessage) -> str:
    body = mail.get_body(preferencelist=("plain",))
    assert body is not None
    return body.get_content()


def link_in(mail: EmailMessage) -> str:
    """The one link of the mail's plain text."""
    links = LINK.findall(text_of(mail))
    assert len(links) == 1, links
    return links[0]


@contextmanager
def smtp_server(refuse_logins: bool = False):
    """(the server's `smtp://` URL, its Inbox). `refuse_logins`: every AUTH fails."""
    inbox = Inbox()
    options = {}
    if refuse_logins:
        options = {
            "auth_require_tls": False,
            "authenticator": lambda *_: AuthResult(success=False, handled=False),
        }
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), **options)
    controller.start()
    try:
        yield f"smtp://127.0.0.1:{controller.port}", inbox
    finally:
        controller.stop()
