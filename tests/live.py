"""A live server on a thread: the real werkzeug server, so websockets work in tests."""

from __future__ import annotations

import threading

import simple_websocket
from werkzeug.serving import make_server

from tests.waiting import eventually


class LiveServer:
    def __init__(self, app):
        self.app = app
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.ws_url = self.url.replace("http://", "ws://")
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def wait_subscribed(app, chat_id, timeout=5.0):
    """The server subscribes right after the handshake; wait for it before acting."""
    hub = app.extensions["services"].hub
    eventually(lambda: hub._by_conversation.get(chat_id), timeout, "the socket never subscribed")


class SocketClient(simple_websocket.Client):
    """simple_websocket's client, reading the frames that came with the handshake's answer.

    Its handshake reads the server's 101 and leaves any frame that arrived in the same read
    buffered; its reader then waits on the socket, and when the server closed at once (a
    refused socket: its close frame, then the end of the connection) it sees the end first
    and reports 1005 without the close it already holds. Seen in CI under load."""

    def _thread(self):
        self.connected = self._handle_events()
        super()._thread()


def connect_socket(url: str, **options) -> SocketClient:
    """A websocket client connected to `url` (simple_websocket's options)."""
    return SocketClient.connect(url, **options)
