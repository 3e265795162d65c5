"""Slowing password guessing without locking the owner out (OWASP's advice; the rules
are in docs/security.md#login).

Per account, failures from anywhere are counted in a window (`RATE_LIMIT_LOGIN_ACCOUNT`,
"5 per hour"). The fifth failure, and each one after, sets the account's delay,
growing: 15 s, 30 s, 60 s ... up to `LOGIN_DELAY_MAX_SECONDS`. The delay is no lock: it
holds back only the addresses that have themselves failed on the account in the window
(answered 429 with `Retry-After`, the password not checked). An address that has not
been guessing still has its password checked, so the owner logs in from their own
address while a stranger guesses from another. Nothing waits in the request (one gevent
worker serves everyone): a delay is a "not before" time, kept as a counter that expires
then, in the rate limiter's own storage (memory, or Redis shared by every process).
"""

from __future__ import annotations

import math
import time

from flask import current_app
from limits import parse

from app.web.extensions import limiter

FIRST_DELAY_SECONDS = 15


def _settings():
    return current_app.config["LOOPDESK"]


def _keys(email: str, address: str) -> tuple[str, str, str]:
    """The account's failures, this address's failures on it, the account's delay."""
    prefix = current_app.config.get("RATELIMIT_KEY_PREFIX", "") + "/login-throttle/"
    account = prefix + email[:254]
    return account, f"{account}/from/{address}", f"{account}/delay"


def _window() -> tuple[int, int]:
    """(failures that run at full speed, the window counting them, in seconds)."""
    item = parse(_settings().rate_limit_login_account)
    return item.amount, item.get_expiry()


def delay_for(failures: int, free: int, cap: int) -> int:
    """The delay after the account's `failures`-th failure of the window."""
    if failures < free:
        return 0
    return min(FIRST_DELAY_SECONDS * 2 ** (failures - free), cap)


def seconds_to_wait(email: str, address: str) -> int:
    """How long this address must wait before its next attempt on this account: 0 unless
    it has failed on the account and the account's delay is running."""
    _, from_here, delay = _keys(email, address)
    storage = limiter.storage
    if storage.get(from_here) == 0 or storage.get(delay) == 0:
        return 0
    return max(1, math.ceil(storage.get_expiry(delay) - time.time()))


def record_failure(email: str, address: str) -> None:
    """A checked, wrong password (or an unknown email, counted the same)."""
    account, from_here, delay = _keys(email, address)
    free, window = _window()
    storage = limiter.storage
    failures = storage.incr(account, window)
    storage.incr(from_here, window)
    seconds = delay_for(failures, free, _settings().login_delay_max_seconds)
    if seconds:
        # A new "not before": the counter's expiry is the time (a new key's expiry is set
        # by incr, in memory and in Redis alike).
        storage.clear(delay)
        storage.incr(delay, seconds)


def record_success(email: str, address: str) -> None:
    """This address knows the password: its own failures on the account are forgiven
    (the account's count and delay stay, for the addresses still guessing)."""
    _, from_here, _ = _keys(email, address)
    limiter.storage.clear(from_here)
