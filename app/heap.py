"""A serving process's heap: what it loads to start (the modules, the app and its services,
the model SDK) lives as long as the process does.

CPython's full garbage collection walks every container object the collector tracks, each
time, and it runs whenever enough objects have outlived two younger collections (a few
turns' worth). After the app's start that is 150,000 objects, 290,000 once the SDK is
imported: 70-290 ms measured on the 2-core machine, in which the process does nothing else
(a gevent worker answers nobody). That was the turn start's p99 (bench/turn_start.py:
55-70 ms at a p50 of 3). `settle` takes what is alive now out of the collector's sight
(`gc.freeze`): later collections walk only what was made since; reference counting still
frees the frozen objects as before. Nothing is collected first: the start leaves next to
no cyclic garbage behind (0 objects after `create_app`, 20 after the SDK's import)."""

from __future__ import annotations

import gc


def settle() -> None:
    """Once the process has loaded what it keeps: at a server's start, and again once the
    model SDK is imported (app/llm/client.py `connect_soon`)."""
    gc.freeze()
