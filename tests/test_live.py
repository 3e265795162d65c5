"""The tests' websocket client reads a refusal that arrives with the handshake's answer."""

from __future__ import annotations

import socket
import threading

import pytest
import simple_websocket
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request

from tests.live import connect_socket


def _refusing_server() -> tuple[int, threading.Thread]:
    """A server that answers the handshake and its close (1008) in one write, then hangs
    up: what a loaded machine's refused socket looks like to the client."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve_one() -> None:
        connection, _ = listener.accept()
        with connection, listener:
            protocol = WSConnection(ConnectionType.SERVER)
            while not any(isinstance(event, Request) for event in _events(protocol, connection)):
                pass
            answer = protocol.send(AcceptConnection())
            answer += protocol.send(CloseConnection(code=1008, reason="No such chat."))
            connection.sendall(answer)

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    return port, thread


def _events(protocol: WSConnection, connection: socket.socket) -> list:
    protocol.receive_data(connection.recv(4096))
    return list(protocol.events())


def _close_seen(client) -> simple_websocket.ConnectionClosed:
    with pytest.raises(simple_websocket.ConnectionClosed) as closed:
        for _ in range(20):  # bounded: the close is already here
            client.receive(timeout=0.5)
    return closed.value


def test_a_close_that_came_with_the_handshake_is_read_with_its_reason():
    port, server = _refusing_server()
    client = connect_socket(f"ws://127.0.0.1:{port}/ws")
    closed = _close_seen(client)
    server.join(timeout=5)
    assert (closed.reason, closed.message) == (1008, "No such chat.")
