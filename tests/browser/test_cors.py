"""A browser app on an origin named in CORS_ORIGINS calls the JSON API with a token, in
Chromium; the same page served from an origin not named cannot read the answer."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.factories import add_token, add_user
from tests.live import LiveServer


class _BlankPage(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the stdlib's name)
        body = b"<!doctype html><title>Another app</title><p>Another app"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def other_app():
    """Another web app on its own port: reached as 127.0.0.1 it is the allowed origin,
    as localhost a different one."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BlankPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


CALL_THE_API = """async ([api, token]) => {
  try {
    const created = await fetch(api + "/api/chats", {
      method: "POST",
      headers: {"Authorization": "Bearer " + token, "Content-Type": "application/json"},
      body: "{}",
    });
    return {status: created.status, chat: (await created.json()).id};
  } catch (error) {
    return {error: String(error)};
  }
}"""


def test_a_page_on_an_allowed_origin_calls_the_api_with_a_token(make_app, context, other_app):
    app = make_app(cors_origins=(f"http://127.0.0.1:{other_app}",))
    _, token = add_token(app, add_user(app, "ada@example.com"))
    api = LiveServer(app).start()
    try:
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{other_app}/")
        answered = page.evaluate(CALL_THE_API, [api.url, token])
        assert answered["status"] == 201 and answered["chat"] > 0

        page.goto(f"http://localhost:{other_app}/")
        refused = page.evaluate(CALL_THE_API, [api.url, token])
        assert "error" in refused  # the browser withholds the answer (TypeError)
    finally:
        api.stop()
