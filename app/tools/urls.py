"""URLs as the taint gate compares them and as confirmation cards show them."""

from __future__ import annotations

from dataclasses import dataclass

import httpx2 as httpx


def _parsed(raw: str) -> httpx.URL | None:
    try:
        url = httpx.URL(raw.strip())
    except Exception:  # httpx raises several types for malformed input
        return None
    if url.scheme not in ("http", "https") or not url.host:
        return None
    return url


def normal_url(raw: str) -> str | None:
    """One spelling per address: lower-case scheme and host (IDN hosts as punycode), the
    default path "/", no fragment; the query kept exactly. None when not an http(s) URL."""
    url = _parsed(raw)
    if url is None:
        return None
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.raw_host.decode('ascii').lower()}{port}{url.raw_path.decode()}"


@dataclass(frozen=True)
class UrlView:
    full: str  # the whole URL as it will be requested (host as punycode)
    before_query: str
    query: str  # without the "?"; empty when there is none
    host_ascii: str
    host_unicode: str

    def as_card(self) -> dict[str, str]:
        card = {
            "full": self.full,
            "beforeQuery": self.before_query,
            "query": self.query,
            "host": self.host_ascii,
        }
        if self.host_unicode != self.host_ascii:
            card["hostUnicode"] = self.host_unicode
        return card


def url_view(raw: str) -> UrlView | None:
    url = _parsed(raw)
    full = normal_url(raw)
    if url is None or full is None:
        return None
    query = url.query.decode()
    before = full[: -(len(query) + 1)] if query else full
    return UrlView(
        full=full,
        before_query=before,
        query=query,
        host_ascii=url.raw_host.decode("ascii").lower(),
        host_unicode=url.host,
    )
