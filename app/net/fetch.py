"""Fetch a web page as readable text, without letting the model reach inside the network.

Every hop (the first request and each redirect) is checked before anything is sent: the
scheme must be http or https, the host is resolved and every address it resolves to must
be public. The connection is then made to the address that was checked (the Host header
and TLS server name carry the hostname), so a second DNS answer cannot swap it."""

from __future__ import annotations

import ipaddress
import re
import socket
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser

import httpx2 as httpx

MAX_BYTES = 2 * 1024 * 1024
MAX_REDIRECTS = 5
TIMEOUT_SECONDS = 10.0
USER_AGENT = "LoopdeskFetch/1.0 (+reads one page for a marketing assistant)"
REDIRECT_STATUSES = {301, 302, 303, 307, 308}

# Always refused, even for allow-listed hostnames: no test needs the cloud metadata service.
METADATA_ADDRESSES = {
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("fd00:ec2::254"),
}

HTML_TYPES = {"text/html", "application/xhtml+xml"}
PLAIN_TYPES = {"text/plain", "text/markdown", "text/csv", "application/json"}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchError(Exception):
    """Why a page was not fetched, in words for the person (and the model relaying it)."""


class FetchRefused(FetchError):
    """The URL is not one we will fetch (scheme, address, content type, redirects)."""


class FetchFailed(FetchError):
    """The fetch was allowed but did not work (DNS, connection, timeout, HTTP error)."""


@dataclass(frozen=True)
class FetchedPage:
    url: str
    final_url: str
    status: int
    content_type: str
    title: str
    text: str
    truncated: bool


class RedirectHeld(Exception):
    """A redirect the caller would not follow on its own (nothing was sent to `target`)."""

    def __init__(self, source: str, target: str):
        super().__init__(f"{source} redirected to {target}")
        self.source = source
        self.target = target


def cross_host_redirects_held(current: httpx.URL, target: httpx.URL) -> None:
    """A redirect policy: stay on the host that was asked for, or stop before leaving it."""
    if _normal_host(target.host) != _normal_host(current.host):
        raise RedirectHeld(str(current), str(target))


def fetch_text(
    url: str,
    allow_hosts: tuple[str, ...] = (),
    on_redirect: Callable[[httpx.URL, httpx.URL], None] | None = None,
) -> FetchedPage:
    """GET `url` (following at most 5 redirects) and return its readable text.

    `allow_hosts` names hostnames (or IP literals) that may resolve to private or loopback
    addresses; it exists for tests and local development. `on_redirect(current, target)`
    sees every redirect before it is followed and may refuse it by raising (RedirectHeld);
    every hop is checked against the address rules as well."""
    allowed = {_normal_host(host) for host in allow_hosts}
    deadline = time.monotonic() + TIMEOUT_SECONDS
    current = _parse(url)
    with httpx.Client(
        timeout=httpx.Timeout(TIMEOUT_SECONDS), follow_redirects=False, trust_env=False
    ) as client:
        for hop in range(MAX_REDIRECTS + 1):
            address = _checked_address(current, allowed)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FetchFailed(f"Fetching {url} timed out after {TIMEOUT_SECONDS:g} seconds.")
            with _open(client, current, address, remaining) as response:
                if response.status_code in REDIRECT_STATUSES:
                    location = response.headers.get("location")
                    if not location:
                        raise FetchFailed(
                            f"{current} answered a redirect ({response.status_code}) "
                            "without a Location."
                        )
                    if hop == MAX_REDIRECTS:
                        raise FetchRefused(
                            f"Too many redirects (more than {MAX_REDIRECTS}) from {url}."
                        )
                    target = _parse(str(current.join(location)))
                    if on_redirect is not None:
                        on_redirect(current, target)
                    current = target
                    continue
                if not 200 <= response.status_code < 300:
                    raise FetchFailed(f"{current} answered HTTP {response.status_code}.")
                return _read_page(url, current, response, deadline)
    raise AssertionError("unreachable")  # pragma: no cover


def check_public_address(raw: str, allow_hosts: tuple[str, ...] = ()) -> None:
    """Refuse (FetchRefused, FetchFailed) a URL whose host is internal: a private,
    loopback or metadata address, unless allow-listed. For addresses another component
    connects to (an MCP server a person adds), checked when given."""
    url = _parse(raw)
    _checked_address(url, {_normal_host(host) for host in allow_hosts})


# --- checking a hop --------------------------------------------------------------------


def _parse(raw: str) -> httpx.URL:
    try:
        url = httpx.URL(raw.strip())
    except Exception as exc:  # httpx raises several types for malformed input
        raise FetchRefused(f"That is not a valid URL: {raw[:200]!r}.") from exc
    if not url.scheme:
        raise FetchRefused("The URL must start with http:// or https://.")
    if url.scheme not in ("http", "https"):
        raise FetchRefused(f"Only http and https URLs can be fetched, not {url.scheme}:.")
    if not url.host:
        raise FetchRefused(f"The URL {raw[:200]!r} has no host.")
    if url.userinfo:
        raise FetchRefused("URLs with a user name or password are not fetched.")
    return url


def _normal_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def _checked_address(url: httpx.URL, allowed: set[str]) -> IPAddress:
    """The address to connect to; every address the host resolves to must be acceptable."""
    host = _normal_host(url.host)
    addresses = _resolve(url)
    for address in addresses:
        if _is_metadata(address):
            raise FetchRefused(f"Refused to fetch {url.host}: it is a cloud metadata address.")
        if host not in allowed and _is_internal(address):
            raise FetchRefused(
                f"Refused to fetch {url.host}: it resolves to a private, loopback or "
                f"otherwise non-public address ({address})."
            )
    return addresses[0]


def _resolve(url: httpx.URL) -> list[IPAddress]:
    host = url.raw_host.decode("ascii")
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        return [literal]
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise FetchFailed(f"Could not resolve the host {url.host}.") from exc
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise FetchFailed(f"Could not resolve the host {url.host}.")
    return addresses


def _is_metadata(address: IPAddress) -> bool:
    return any(candidate in METADATA_ADDRESSES for candidate in _forms(address))


def _is_internal(address: IPAddress) -> bool:
    for candidate in _forms(address):
        if (
            not candidate.is_global
            or candidate.is_loopback
            or candidate.is_private
            or candidate.is_link_local
            or candidate.is_multicast
            or candidate.is_reserved
            or candidate.is_unspecified
        ):
            return True
    return False


def _forms(address: IPAddress) -> list[IPAddress]:
    """The address plus any IPv4 address embedded in it (mapped, 6to4, Teredo)."""
    forms: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        for embedded in (address.ipv4_mapped, address.sixtofour):
            if embedded is not None:
                forms.append(embedded)
        if address.teredo is not None:
            forms.extend(address.teredo)
    return forms


# --- talking to the checked address ----------------------------------------------------


@contextmanager
def _open(
    client: httpx.Client, url: httpx.URL, address: IPAddress, timeout: float
) -> Iterator[httpx.Response]:
    """Stream a GET to `address`, presenting `url`'s hostname in Host and SNI."""
    target = url.copy_with(host=str(address), fragment=None)
    headers = {
        "Host": url.netloc.decode("ascii"),
        "User-Agent": USER_AGENT,
        "Accept": "text/html, application/xhtml+xml, text/plain, application/json;q=0.9",
        "Accept-Encoding": "identity",
    }
    extensions = {"sni_hostname": url.raw_host.decode("ascii")} if url.scheme == "https" else {}
    request = client.build_request(
        "GET", target, headers=headers, extensions=extensions, timeout=httpx.Timeout(timeout)
    )
    try:
        response = client.send(request, stream=True)
    except httpx.HTTPError as exc:
        raise _failure(url, exc) from exc
    try:
        yield response
    finally:
        response.close()


def _failure(where, exc: Exception) -> FetchFailed:
    if isinstance(exc, httpx.TimeoutException):
        return FetchFailed(f"Fetching {where} timed out after {TIMEOUT_SECONDS:g} seconds.")
    return FetchFailed(f"Could not fetch {where}: {exc.__class__.__name__}: {exc}".strip())


def _read_page(
    requested: str, url: httpx.URL, response: httpx.Response, deadline: float
) -> FetchedPage:
    content_type = response.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    is_html = media_type in HTML_TYPES
    if not (is_html or media_type in PLAIN_TYPES or media_type.endswith("+json")):
        shown = media_type or "no content type"
        raise FetchRefused(
            f"{url} is {shown}; only web pages (HTML), plain text and JSON can be read."
        )
    body, truncated = _read_body(url, response, deadline)
    charset = response.charset_encoding or _meta_charset(body if is_html else b"") or "utf-8"
    try:
        decoded = body.decode(charset, errors="replace")
    except LookupError:
        decoded = body.decode("utf-8", errors="replace")
    if is_html:
        title, text = html_to_text(decoded)
    else:
        title, text = "", decoded.strip()
    return FetchedPage(
        url=requested,
        final_url=str(url),
        status=response.status_code,
        content_type=media_type,
        title=title,
        text=text,
        truncated=truncated,
    )


def _read_body(url: httpx.URL, response: httpx.Response, deadline: float) -> tuple[bytes, bool]:
    """At most MAX_BYTES of (decoded) body; stops reading as soon as the cap is passed."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    decompressor = _decompressor(url, encoding)
    body = bytearray()
    try:
        for chunk in response.iter_raw():
            if time.monotonic() > deadline:
                raise FetchFailed(f"Fetching {url} timed out after {TIMEOUT_SECONDS:g} seconds.")
            if decompressor is not None:
                chunk = decompressor.decompress(chunk, MAX_BYTES + 1 - len(body))
            body.extend(chunk)
            if len(body) > MAX_BYTES:
                return bytes(body[:MAX_BYTES]), True
    except httpx.HTTPError as exc:
        raise _failure(url, exc) from exc
    except zlib.error as exc:
        raise FetchFailed(f"{url} sent a body that could not be decompressed.") from exc
    return bytes(body), False


def _decompressor(url: httpx.URL, encoding: str):
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    raise FetchRefused(f"{url} sent content encoded as {encoding}, which is not supported.")


_META_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_\-:.]+)""", re.IGNORECASE)


def _meta_charset(head: bytes) -> str | None:
    match = _META_CHARSET.search(head[:4096])
    return match.group(1).decode("ascii") if match else None


# --- HTML to readable text -------------------------------------------------------------

SKIPPED = {"script", "style", "noscript", "template", "svg", "iframe", "object", "canvas"}
BLOCKS = {
    "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "li", "main",
    "nav", "ol", "p", "pre", "section", "summary", "table", "tr", "ul",
}  # fmt: skip
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source"}


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self.skip_depth = 0
        self.in_title = False
        self.seen_title = False

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in SKIPPED:
            self.skip_depth += 1
        elif tag == "title" and not self.seen_title:
            self.in_title = True
        elif tag in HEADINGS:
            self.parts.append("\n\n" + "#" * HEADINGS[tag] + " ")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag in BLOCKS:
            self.parts.append("\n\n" if tag == "p" else "\n")

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag in SKIPPED:  # a self-closed <svg/> opens nothing
            return
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED:
            self.skip_depth = max(0, self.skip_depth - 1)
        elif tag == "title" and self.in_title:
            self.in_title = False
            self.seen_title = True
        elif tag in HEADINGS or tag == "p":
            self.parts.append("\n\n")
        elif tag in BLOCKS and tag not in VOID and tag != "li":
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skip_depth:
            return
        if self.in_title:
            self.title_parts.append(data)
            return
        self.parts.append(re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> tuple[str, str]:
    """(title, readable text) of an HTML document."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    title = re.sub(r"\s+", " ", "".join(parser.title_parts)).strip()
    lines = [line.strip() for line in "".join(parser.parts).split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return title, text
