"""fetch_text: readable text from allowed pages; internal addresses refused before any
connection. A guard fails the test if a socket connects anywhere but loopback."""

from __future__ import annotations

import gzip
import ipaddress
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from app.net import fetch
from app.net.fetch import MAX_BYTES, FetchedPage, FetchFailed, FetchRefused, fetch_text

LOCAL = ("127.0.0.1",)

PAGE = b"""<!doctype html><html><head><title> Calm &amp; Co </title>
<style>body { color: red }</style><script>alert("x")</script></head>
<body><noscript>Enable JS</noscript><h1>Morning routines</h1>
<p>Two focused   hours
before 10am.</p><ul><li>Plan</li><li>Protect</li></ul>
<h2>Pricing</h2><p>From $490 &mdash; six weeks.</p></body></html>"""


class Handler(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self):
        Handler.seen.append(self.path)
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        path = parts.path
        try:
            if path == "/page":
                self.reply(200, "text/html; charset=utf-8", PAGE)
            elif path == "/plain":
                self.reply(200, "text/plain", b"  just text\n")
            elif path == "/json":
                self.reply(200, "application/json", b'{"price": 490}')
            elif path == "/latin":
                body = "<title>Caf\xe9</title><p>cr\xe8me</p>".encode("latin-1")
                self.reply(200, "text/html; charset=iso-8859-1", body)
            elif path == "/pdf":
                self.reply(200, "application/pdf", b"%PDF-1.4")
            elif path == "/missing":
                self.reply(404, "text/plain", b"nope")
            elif path == "/host":
                self.reply(200, "text/plain", self.headers["Host"].encode())
            elif path == "/redirect":
                self.redirect(query["to"][0])
            elif path.startswith("/chain/"):
                left = int(path.rsplit("/", 1)[1])
                self.redirect(f"/chain/{left - 1}" if left > 1 else "/plain")
            elif path == "/big":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                chunk = b"a" * 65536
                for _ in range(3 * 1024 * 1024 // len(chunk)):
                    self.wfile.write(chunk)
            elif path == "/bomb":
                body = gzip.compress(b"b" * (20 * 1024 * 1024))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif path == "/gzip":
                body = gzip.compress(b"zipped text")
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif path == "/slow":
                time.sleep(0.6)
                self.reply(200, "text/plain", b"late")
            else:
                self.reply(404, "text/plain", b"unknown")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def reply(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Any socket connecting to a non-loopback address fails the test."""
    real_connect = socket.socket.connect
    attempts = []

    def guarded(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        attempts.append(host)
        assert ipaddress.ip_address(host.split("%")[0]).is_loopback, f"connected to {host}"
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return attempts


@pytest.fixture
def server():
    Handler.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_html_becomes_readable_text_with_a_title(server):
    page = fetch_text(server + "/page#top", LOCAL)
    assert isinstance(page, FetchedPage)
    assert page.status == 200
    assert page.content_type == "text/html"
    assert page.title == "Calm & Co"
    assert page.text == (
        "# Morning routines\n\nTwo focused hours before 10am.\n\n- Plan\n- Protect\n\n"
        "## Pricing\n\nFrom $490 \u2014 six weeks."
    )
    assert page.url == server + "/page#top"
    assert page.final_url == server + "/page#top"  # the fragment is never sent
    assert not page.truncated


def test_plain_text_and_json_pass_through(server):
    assert fetch_text(server + "/plain", LOCAL).text == "just text"
    page = fetch_text(server + "/json", LOCAL)
    assert page.text == '{"price": 490}'
    assert page.title == ""


def test_declared_charset_is_used(server):
    page = fetch_text(server + "/latin", LOCAL)
    assert (page.title, page.text) == ("Caf\xe9", "cr\xe8me")


def test_gzip_bodies_are_decoded(server):
    assert fetch_text(server + "/gzip", LOCAL).text == "zipped text"


def test_other_content_types_are_refused(server):
    with pytest.raises(FetchRefused, match="application/pdf"):
        fetch_text(server + "/pdf", LOCAL)


def test_http_errors_fail_clearly(server):
    with pytest.raises(FetchFailed, match="HTTP 404"):
        fetch_text(server + "/missing", LOCAL)


def test_loopback_is_refused_without_the_allow_list(server):
    with pytest.raises(FetchRefused, match="non-public address"):
        fetch_text(server + "/plain")
    assert Handler.seen == []


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1]/",
        "http://10.0.0.1/",
        "http://172.16.0.1/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://0.0.0.0/",
        "http://127.0.0.2:8080/",
        "http://[::ffff:127.0.0.1]/",
        "http://100.64.0.1/",
        "http://224.0.0.1/",
        "https://[fe80::1]/",
        "http://2130706433/",
        "http://localhost/",
        "http://LOCALHOST/",
    ],
)
def test_internal_addresses_are_refused_before_connecting(url, loopback_only):
    with pytest.raises(FetchRefused):
        fetch_text(url)
    assert loopback_only == []


def test_cloud_metadata_is_refused_even_when_allow_listed(loopback_only):
    with pytest.raises(FetchRefused, match="metadata"):
        fetch_text("http://169.254.169.254/", ("169.254.169.254",))
    assert loopback_only == []


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/file.txt",
        "javascript:alert(1)",
        "data:text/plain,hello",
        "example.com/page",
        "http:///nohost",
        "http://user:secret@example.com/",
    ],
)
def test_only_plain_http_urls_are_fetched(url, loopback_only):
    with pytest.raises(FetchRefused):
        fetch_text(url)
    assert loopback_only == []


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://localhost/",
        "file:///etc/passwd",
    ],
)
def test_redirects_are_checked_again(server, target, loopback_only):
    with pytest.raises(FetchRefused):
        fetch_text(f"{server}/redirect?to={target}", LOCAL)
    assert Handler.seen == [f"/redirect?to={target}"]
    assert set(loopback_only) == {"127.0.0.1"}


def test_redirects_are_followed_up_to_five(server):
    page = fetch_text(server + "/chain/5", LOCAL)
    assert page.text == "just text"
    assert page.final_url == server + "/plain"
    assert len(Handler.seen) == 6


def test_more_than_five_redirects_are_refused(server):
    with pytest.raises(FetchRefused, match="Too many redirects"):
        fetch_text(server + "/chain/6", LOCAL)
    assert len(Handler.seen) == 6


def test_bodies_over_2_mb_are_truncated(server):
    page = fetch_text(server + "/big", LOCAL)
    assert page.truncated
    assert len(page.text) == MAX_BYTES
    assert set(page.text) == {"a"}


def test_compressed_bodies_are_capped_while_decoding(server):
    page = fetch_text(server + "/bomb", LOCAL)
    assert page.truncated
    assert len(page.text) == MAX_BYTES


def test_slow_servers_time_out(server, monkeypatch):
    monkeypatch.setattr(fetch, "TIMEOUT_SECONDS", 0.2)
    with pytest.raises(FetchFailed, match="timed out"):
        fetch_text(server + "/slow", LOCAL)


def _fake_dns(monkeypatch, answers: dict[str, list[str]]) -> list[str]:
    """Resolve the given names to the given addresses; everything else as usual."""
    real = socket.getaddrinfo
    lookups = []

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            lookups.append(host)
            return [
                (
                    socket.AF_INET6 if ":" in address else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (address, port),
                )
                for address in answers[host]
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def test_connection_goes_to_the_checked_address_with_the_hostname(server, monkeypatch):
    lookups = _fake_dns(monkeypatch, {"site.test": ["127.0.0.1"]})
    port = server.rsplit(":", 1)[1]
    page = fetch_text(f"http://site.test:{port}/host", ("site.test",))
    assert page.text == f"site.test:{port}"
    assert page.final_url == f"http://site.test:{port}/host"
    assert lookups == ["site.test"]  # resolved once, by the check; never again


def test_every_resolved_address_must_be_public(monkeypatch, loopback_only):
    _fake_dns(monkeypatch, {"rebind.test": ["93.184.216.34", "10.0.0.1"]})
    with pytest.raises(FetchRefused, match="10.0.0.1"):
        fetch_text("http://rebind.test/")
    assert loopback_only == []


def test_a_hostname_resolving_to_loopback_is_refused(monkeypatch, loopback_only):
    _fake_dns(monkeypatch, {"sneaky.test": ["127.0.0.1"]})
    with pytest.raises(FetchRefused):
        fetch_text("http://sneaky.test/", ("other.test",))
    assert loopback_only == []


def test_unresolvable_hosts_fail_clearly(monkeypatch):
    def nowhere(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", nowhere)
    with pytest.raises(FetchFailed, match="Could not resolve"):
        fetch_text("http://no-such-host.test/")
