"""Ports for the processes a test starts (`make run`, gunicorn, `flask serve`), which must
be told a port before they bind it.

A port probed free with bind(0) comes from the kernel's ephemeral range, where the kernel
may hand it out again (to the other xdist worker's probe, server or client connection)
before the started process binds it. Each worker takes its ports from its own block below
that range instead (Linux's default starts at 32768), moving on past any port in use."""

from __future__ import annotations

import itertools
import os
import random
import socket

FIRST_PORT = 20_000
BLOCK = 1_000


def _worker_index() -> int:
    """0 without xdist; 1, 2, ... for the workers gw0, gw1, ..."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) + 1 if name.startswith("gw") else 0


_start = FIRST_PORT + _worker_index() * BLOCK
# A random first port: a second suite run at the same time (another checkout) starts
# elsewhere in the block; after that the ports go round so none is reused soon.
_offset = random.randrange(BLOCK)
_ports = itertools.cycle([_start + (_offset + n) % BLOCK for n in range(BLOCK)])


def free_port() -> int:
    """A port of this worker's block that nothing listens on or holds right now."""
    for port in itertools.islice(_ports, BLOCK):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {_start}..{_start + BLOCK - 1}")
