"""The rate limiter's counters in this process's memory, when there is no Redis.

The limits library's own memory storage starts a timer thread to drop expired counters
whenever its last one has ended (10 ms after it started): most rate-limited requests paid
for starting a thread, about half a millisecond of CPU, a greenlet under gevent no cheaper.
Here a counter past its window is dropped when it is next read, and the others at most
once a minute, by whichever request comes then. Fixed windows only, the limiter's default
strategy (and the one this app uses).
"""

from __future__ import annotations

import threading
import time

from limits.storage import Storage

SWEEP_SECONDS = 60.0


class ThreadlessMemoryStorage(Storage):
    STORAGE_SCHEME = ["loopdesk-memory"]

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, **options):
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._expiries: dict[str, float] = {}
        self._next_sweep = time.time() + SWEEP_SECONDS

    @property
    def base_exceptions(self) -> type[Exception]:
        return ValueError

    def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        now = time.time()
        with self._lock:
            if now >= self._next_sweep:
                self._sweep(now)
            if self._expiries.get(key, 0) <= now:
                self._counts[key] = 0
                self._expiries[key] = now + expiry
            self._counts[key] += amount
            return self._counts[key]

    def get(self, key: str) -> int:
        with self._lock:
            if self._expiries.get(key, 0) <= time.time():
                self._drop(key)
                return 0
            return self._counts.get(key, 0)

    def get_expiry(self, key: str) -> float:
        with self._lock:
            return self._expiries.get(key, time.time())

    def check(self) -> bool:
        return True

    def reset(self) -> int | None:
        with self._lock:
            dropped = len(self._counts)
            self._counts.clear()
            self._expiries.clear()
        return dropped

    def clear(self, key: str) -> None:
        with self._lock:
            self._drop(key)

    def _drop(self, key: str) -> None:
        self._counts.pop(key, None)
        self._expiries.pop(key, None)

    def _sweep(self, now: float) -> None:
        for key in [key for key, expires in self._expiries.items() if expires <= now]:
            self._drop(key)
        self._next_sweep = now + SWEEP_SECONDS
