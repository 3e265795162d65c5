"""The provider's web search server tool: offered beside our own tools where the model
server runs it (`WEB_SEARCH`), run within the model's reply. Its results come back in the
turn's blocks (`server_tool_use`, then `web_search_tool_result`), are kept verbatim (the
page text is encrypted, and the next request must send it back as it came), taint the
chat like a fetched page, and the answer's citations are shown as links under it."""

from __future__ import annotations

from typing import Any

TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
RESULT = "web_search_tool_result"


def search_sources(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The untrusted content a turn's searches read: one source per search, with its query
    and the addresses it found (empty: the turn searched nothing)."""
    queries = {
        block.get("id"): str((block.get("input") or {}).get("query", ""))
        for block in blocks
        if block.get("type") == "server_tool_use"
    }
    sources = []
    for block in blocks:
        if block.get("type") != RESULT:
            continue
        content = block.get("content")
        results = content if isinstance(content, list) else []
        urls = [str(result.get("url", "")) for result in results if isinstance(result, dict)]
        query = queries.get(block.get("tool_use_id"), "")
        sources.append({"web_search": query, "urls": urls[:10]})
    return sources


def cited_links(blocks: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The pages an answer cites, once each, in order: {url, title}; only http(s) ones."""
    links: list[dict[str, str]] = []
    seen: set[str] = set()
    for block in blocks:
        for citation in block.get("citations") or [] if block.get("type") == "text" else []:
            url = str(citation.get("url", ""))
            if url in seen or not url.lower().startswith(("https://", "http://")):
                continue
            seen.add(url)
            links.append({"url": url, "title": str(citation.get("title") or url)[:200]})
    return links
