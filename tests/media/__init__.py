"""A tiny OpenAI-compatible images API on 127.0.0.1, for the provider and the tools and
pages that generate images through it."""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image


def tiny_png(size=(8, 8), colour="#2f6f5e") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


class ImagesAPI:
    """POST /v1/images/generations on 127.0.0.1; answers what the test sets."""

    def __init__(self):
        self.requests: list[dict] = []
        self.status = 200
        self.payload: dict | bytes = {"created": 1, "data": [{"b64_json": ""}]}
        self.delay = 0.0
        self.image = tiny_png()
        self.on_request = None  # called while the request waits for its answer
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                api.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": json.loads(self.rfile.read(length) or b"{}"),
                    }
                )
                if api.on_request is not None:
                    api.on_request()
                if api.delay:
                    time.sleep(api.delay)
                payload = api.payload
                if isinstance(payload, dict) and payload.get("data") == [{"b64_json": ""}]:
                    payload = {
                        "created": 1,
                        "data": [{"b64_json": base64.b64encode(api.image).decode()}],
                    }
                body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(api.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (timeout test)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
