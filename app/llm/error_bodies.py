"""What a model server's error says, read from its body: the Messages API's own error, the
shapes other servers use, a plain-text body, or a web page from a wrong base URL."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import httpx2 as httpx

from app.llm.errors import NOT_MESSAGES_API, ModelError

if TYPE_CHECKING:
    import anthropic

# What a model error says when the server answered with a web page (a wrong base URL).
HTML_REPLY = "the server answered with an HTML page, not the Messages API"
# A plain-text error body is kept up to this many characters.
MAX_TEXT_BODY_CHARS = 2_000


def error_type(error: anthropic.APIStatusError) -> str:
    body = error.body if isinstance(error.body, dict) else {}
    inner = body.get("error", body)
    kind = inner.get("type", "") if isinstance(inner, dict) else ""
    if not isinstance(kind, str) or kind in ("None", "null"):  # LiteLLM sends "None"
        return ""
    if not kind and _looks_like_html(_body_text(error), content_type(error.response)):
        return NOT_MESSAGES_API
    return kind


def error_message(error: anthropic.APIStatusError) -> str:
    """The server's own words: the Messages API's `error.message`, the shapes other servers
    use ({"error": "..."}, {"detail": ...}), a plain-text body, or a short note for a
    body that is not the Messages API at all (an HTML page from a wrong base URL)."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str) and inner.strip():
            return inner
        detail = body.get("detail") or body.get("message")
        if isinstance(detail, str) and detail.strip():
            return detail
        if (
            isinstance(detail, list)
            and detail
            and all(isinstance(item, dict) and item.get("msg") for item in detail)
        ):  # a FastAPI validation error (a 422 from some proxies)
            return "; ".join(_validation_item(item) for item in detail)
        return json.dumps(body, ensure_ascii=False, default=str)
    return not_json_message(_body_text(error), content_type(error.response), error.status_code)


def _validation_item(item: dict[str, Any]) -> str:
    where = ".".join(str(part) for part in item.get("loc") or ())
    return f"{where}: {item['msg']}" if where else str(item["msg"])


def _body_text(error: anthropic.APIStatusError) -> str:
    if isinstance(error.body, str):
        return error.body
    return "" if error.body is None else json.dumps(error.body, default=str)


def content_type(response: httpx.Response | None) -> str:
    return (response.headers.get("content-type", "") if response is not None else "").lower()


def _looks_like_html(text: str, content_type: str) -> bool:
    head = text.lstrip()[:512].lower()
    return "text/html" in content_type or head.startswith(("<!doctype html", "<html", "<head"))


def not_json_message(text: str, content_type: str, status: int | None) -> str:
    """What a body that is not Messages API JSON says, briefly."""
    if _looks_like_html(text, content_type):
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
        named = f" titled {' '.join(title.group(1).split())[:80]!r}" if title else ""
        return f"{HTML_REPLY} (HTTP {status}{named})"
    text = " ".join(text.split())
    if not text:
        return f"the server answered HTTP {status} with an empty body"
    return text if len(text) <= MAX_TEXT_BODY_CHARS else text[:MAX_TEXT_BODY_CHARS] + "…"


def start_of(response: httpx.Response, limit: int = 65_536) -> str:
    """The first `limit` bytes of a streamed body, as text."""
    data = b""
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) >= limit:
            break
    return data[:limit].decode("utf-8", "replace")


def model_error(error: anthropic.APIStatusError) -> ModelError:
    return ModelError(
        error_type(error) or "api_error", error_message(error), status=error.status_code
    )
