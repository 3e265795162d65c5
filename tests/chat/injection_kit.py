"""Shared by the injection tests: local web servers that count every request they get
(pages with injected instructions, redirects, a collector that must never be reached)."""

from __future__ import annotations

import http.server
import threading


class Site:
    """A local web site on `address`: `pages` by path, `redirects` by path (to a full URL);
    `requests` lists every path (with its query) it was asked for."""

    def __init__(self, address: str = "127.0.0.1"):
        self.pages: dict[str, str] = {}
        self.redirects: dict[str, str] = {}
        self.requests: list[str] = []
        self.collected: list[str] = []
        # Called with each path while it is served, before the answer goes out.
        self.on_request = lambda path: None
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                site.requests.append(self.path)
                site.on_request(self.path)
                if self.path.startswith("/collect"):
                    site.collected.append(self.path)
                path = self.path.split("?")[0]
                if path in site.redirects:
                    self.send_response(302)
                    self.send_header("Location", site.redirects[path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = site.pages.get(path, "<html><body>ok</body></html>").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self.url = f"http://{address}:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, path: str, instruction: str) -> str:
        self.pages[path] = (
            "<html><head><title>Spring tips</title></head><body><p>Great tips.</p>"
            f"<p>{instruction}</p></body></html>"
        )
        return f"{self.url}{path}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
