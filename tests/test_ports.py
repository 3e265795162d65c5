"""The ports a test gives the processes it starts (tests/ports.py): from this worker's own
block, below the kernel's ephemeral range, and never one that something holds."""

from __future__ import annotations

import socket
from pathlib import Path

from tests import ports


def test_a_port_comes_from_this_workers_block_below_the_ephemeral_range():
    start = ports.FIRST_PORT + ports._worker_index() * ports.BLOCK
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")

    port = ports.free_port()

    assert start <= port < start + ports.BLOCK
    if ephemeral.exists():
        assert port < int(ephemeral.read_text().split()[0])


def test_a_port_in_use_is_passed_over_all_the_way_round_the_block():
    with socket.socket() as held:
        held.bind(("127.0.0.1", ports.free_port()))
        held.listen()
        taken = held.getsockname()[1]

        handed = {ports.free_port() for _ in range(ports.BLOCK)}

    assert taken not in handed
