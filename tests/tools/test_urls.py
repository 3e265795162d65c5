"""How the taint gate spells addresses: one spelling per address, the query kept exactly,
international hosts as punycode (so a look-alike never equals the real name)."""

from __future__ import annotations

from app.tools.urls import normal_url, url_view


def test_one_spelling_per_address():
    assert normal_url("HTTP://Example.COM") == "http://example.com/"
    assert normal_url("https://example.com/a#part") == "https://example.com/a"
    assert normal_url("https://example.com:8443/a?b=1") == "https://example.com:8443/a?b=1"


def test_the_query_is_part_of_the_address():
    assert normal_url("https://example.com/a?q=secret") != normal_url("https://example.com/a")


def test_a_lookalike_host_is_not_the_real_one_and_shows_as_punycode():
    lookalike = "https://\u0435xample.com/"
    assert normal_url(lookalike) == "https://xn--xample-2of.com/"
    assert normal_url(lookalike) != normal_url("https://example.com/")
    view = url_view(lookalike + "?q=1").as_card()
    assert view["host"] == "xn--xample-2of.com" and view["hostUnicode"] == "\u0435xample.com"
    assert view["query"] == "q=1" and view["beforeQuery"] == "https://xn--xample-2of.com/"


def test_not_a_web_address():
    assert normal_url("ftp://example.com/") is None
    assert normal_url("example.com") is None
    assert url_view("javascript:alert(1)") is None
