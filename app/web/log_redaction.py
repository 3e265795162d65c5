"""Request logs never hold a share link's token (app/chat/shares.py).

The token is in the shared page's path, `/s/<token>`, and in the login page's `next`
(`/login?next=%2Fs%2F<token>`, or a Referer naming it). The request loggers (werkzeug's,
for Flask's threaded server; gunicorn's access log, when GUNICORN_ACCESS_LOG turns it on)
write every request line, and Flask names the path of a request that failed: this filter replaces the token in each of their records before
any handler formats it."""

from __future__ import annotations

import logging
import re
from typing import Any

# `/s/<token>` (or `%2Fs%2F<token>` in a query): the path segment after it, whatever it is.
SHARE_PATH = re.compile(r"(/s/|%2[Ff]s%2[Ff])[^/?#\s\"'&%]+")
REDACTED = r"\1[redacted]"
REQUEST_LOGGERS = ("werkzeug", "gunicorn.access")


def redact(text: str) -> str:
    return SHARE_PATH.sub(REDACTED, text)


def _redacted(value: Any) -> Any:
    return redact(value) if isinstance(value, str) else value


class ShareTokenFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, dict):
            record.args = {key: _redacted(value) for key, value in record.args.items()}
        elif isinstance(record.args, tuple):
            record.args = tuple(_redacted(value) for value in record.args)
        return True


_FILTER = ShareTokenFilter()


def install(app_logger: logging.Logger) -> None:
    """The request loggers, and the app's own (Flask logs "Exception on <path>" there).
    Again is harmless: a logger keeps a filter once."""
    for logger in (*map(logging.getLogger, REQUEST_LOGGERS), app_logger):
        logger.addFilter(_FILTER)
