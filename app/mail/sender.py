"""Sending mail, off the request: `Mailer.send` hands the mail to a small pool and returns
at once; the pool talks SMTP with a timeout on every step (under gevent's monkey-patching
its threads are greenlets and smtplib's socket yields, so nothing blocks the serving
loop). A failure is logged, without the password, and reaches no page. Without SMTP_URL
the mail is written to the log at INFO, links and all (development: `make run`)."""

from __future__ import annotations

import base64
import ipaddress
import logging
import smtplib
import ssl
from concurrent.futures import Future, ThreadPoolExecutor
from email.message import EmailMessage
from email.utils import make_msgid
from threading import Lock
from urllib.parse import SplitResult, unquote, urlsplit

from app.config import Settings

log = logging.getLogger(__name__)
MAIL_THREADS = 2  # mails in flight at once per process; more wait their turn


class MailRefused(Exception):
    """The server cannot be used as configured (no TLS to send a password over)."""


def build_message(sender: str, to: str, subject: str, text: str, html: str | None) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    return message


class Mailer:
    """One per app: `send` builds the message and delivers it in the background."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.server = urlsplit(settings.smtp_url) if settings.smtp_url else None
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = Lock()

    def send(self, to: str, subject: str, text: str, html: str | None = None) -> Future[bool]:
        """Deliver (or, without SMTP_URL, log) a mail; the future says whether it went."""
        message = build_message(self.settings.mail_from, to, subject, text, html)
        if self.server is None:
            log.info(
                "mail not sent (no SMTP_URL), written here instead:\n"
                "From: %s\nTo: %s\nSubject: %s\n\n%s",
                message["From"],
                to,
                subject,
                text,
            )
            done: Future[bool] = Future()
            done.set_result(False)
            return done
        return self._threadpool().submit(self._deliver_logged, message)

    def close(self, wait: bool = False) -> None:
        """Stop taking mails; `wait`: until those handed over are sent or have failed."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait)

    def _threadpool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(MAIL_THREADS, thread_name_prefix="mail")
            return self._pool

    def _deliver_logged(self, message: EmailMessage) -> bool:
        try:
            assert self.server is not None
            deliver(self.server, message, self.settings.mail_timeout_seconds)
        except Exception as error:  # a mail never takes anything else down
            log.warning(
                "mail to %s (%s) not sent: %s",
                message["To"],
                message["Subject"],
                scrubbed(f"{type(error).__name__}: {error}", self.server),
            )
            return False
        log.info("mail to %s (%s) sent", message["To"], message["Subject"])
        return True


def deliver(server: SplitResult, message: EmailMessage, timeout: float) -> None:
    """One SMTP conversation: TLS from the start (smtps), or STARTTLS when offered; a
    password only over TLS, or to a server on this machine."""
    host = server.hostname or ""
    tls = ssl.create_default_context()
    client: smtplib.SMTP
    if server.scheme == "smtps":
        client = smtplib.SMTP_SSL(host, server.port or 465, timeout=timeout, context=tls)
    else:
        client = smtplib.SMTP(host, server.port or 25, timeout=timeout)
    with client:
        client.ehlo()
        secure = server.scheme == "smtps"
        if not secure and client.has_extn("starttls"):
            client.starttls(context=tls)
            client.ehlo()
            secure = True
        if server.username:
            if not secure and not _is_loopback(host):
                raise MailRefused(
                    f"{host} offers no STARTTLS: the password is not sent in the clear "
                    "(use smtps://, or a server that offers STARTTLS)"
                )
            client.login(unquote(server.username), unquote(server.password or ""))
        client.send_message(message)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def scrubbed(text: str, server: SplitResult | None) -> str:
    """`text` without the password in any form a server or library could echo back (as
    typed, URL-decoded, or base64 as in AUTH PLAIN and LOGIN)."""
    if server is None or not server.password:
        return text
    user, password = unquote(server.username or ""), unquote(server.password)
    forms = {
        server.password,
        password,
        base64.b64encode(password.encode()).decode(),
        base64.b64encode(f"\0{user}\0{password}".encode()).decode(),
    }
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, "***")
    return text
