"""The socket's Origin check compares the whole origin (scheme, host, effective port) with
PUBLIC_URL, or with the request's own origin (as trusted proxies saw it) when unset.
Through the test client a refused handshake is 403 before anything else; an accepted one
reaches flask-sock, which answers a plain (non-upgrade) request with 400. Real sockets:
tests/web/test_sockets.py."""

from __future__ import annotations

import pytest

REFUSED = 403


def handshake(client, origin: str, host: str = "localhost", **environ) -> int:
    response = client.get(
        "/ws/chats/1",
        headers={"Origin": origin},
        base_url=f"http://{host}",
        environ_base=environ,
    )
    return response.status_code


@pytest.mark.parametrize(
    ("host", "origin", "accepted"),
    [
        ("localhost", "http://localhost", True),
        ("localhost", "http://LOCALHOST:80", True),
        ("localhost", "https://localhost", False),  # the scheme counts
        ("localhost", "http://localhost:8080", False),  # a port where Host has none
        ("localhost", "https://localhost:80", False),
        ("localhost:5000", "http://localhost:5000", True),
        ("localhost:5000", "http://localhost", False),
        ("localhost:5000", "http://localhost:5001", False),
        ("localhost", "http://localhost.evil.example", False),
        ("localhost", "null", False),
        ("localhost", "http://[::1", False),
        ("localhost", "ftp://localhost", False),
    ],
)
def test_the_origin_must_be_the_requests_own(app, host, origin, accepted):
    status = handshake(app.test_client(), origin, host)
    assert (status != REFUSED) is accepted, status


@pytest.mark.parametrize(
    ("origin", "accepted"),
    [
        ("https://chat.example.com", True),
        ("https://chat.example.com:443", True),
        ("http://chat.example.com", False),
        ("https://chat.example.com:8443", False),
        ("http://localhost", False),  # the request's own origin no longer counts
    ],
)
def test_with_a_public_url_the_origin_must_be_it(make_app, origin, accepted):
    app = make_app(public_url="https://chat.example.com/")
    status = handshake(app.test_client(), origin)
    assert (status != REFUSED) is accepted, status


PROXIED = {
    "HTTP_X_FORWARDED_FOR": "203.0.113.5",
    "HTTP_X_FORWARDED_PROTO": "https",
    "HTTP_X_FORWARDED_HOST": "chat.example.com",
    "REMOTE_ADDR": "10.9.9.9",
}


def test_behind_a_trusted_proxy_the_public_origin_is_the_one_the_proxy_saw(make_app):
    client = make_app(trusted_proxies=1).test_client()
    assert handshake(client, "https://chat.example.com", **PROXIED) != REFUSED
    assert handshake(client, "http://chat.example.com", **PROXIED) == REFUSED
    assert handshake(client, "http://localhost", **PROXIED) == REFUSED


def test_forwarded_headers_from_an_untrusted_client_are_ignored(app):
    client = app.test_client()
    assert handshake(client, "https://chat.example.com", **PROXIED) == REFUSED
    assert handshake(client, "http://localhost", **PROXIED) != REFUSED


def test_a_socket_without_an_origin_is_a_script_and_passes_this_check(app):
    assert app.test_client().get("/ws/chats/1").status_code != REFUSED


def test_public_url_must_be_an_http_url(make_app):
    from app.config import load_settings

    with pytest.raises(ValueError, match="PUBLIC_URL"):
        load_settings(env={"PUBLIC_URL": "chat.example.com", "SECRET_KEY": "x"})
