"""The demo model: a scripted stand-in for the Anthropic Messages API, served in-process.

When no model is configured, `DemoTransport` is plugged into the real SDK as its HTTP
transport, so a run goes through exactly the code path it takes with a real model: the SDK
builds the request, the transport answers it with the API's wire format (a JSON message,
or `text/event-stream` when the body asks for `"stream": true`), and the SDK decodes it.

The demo decides statelessly from each request (system prompt, tools offered and the
messages so far) and walks the person through one real flow:

1. a new user message: a short text, then `list_offers`;
2. the offers: `select_offer` (or, with none, a pointer to /workspace/offers);
3. the chosen offer: `ad_copy` for that offer;
4. the saved ad copy: a short presentation of the result.

A dismissed card or a failed tool gets a short apology. An agent's own call (a forced
`submit_<agent>` tool) gets a schema-valid answer for that agent as the tool's input,
streamed in pieces.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

from app.config import DEMO_MODEL_NAME

DEFAULT_DELAY = 0.015

CONFIGURE_HINT = "configure ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL for a real one"

# Distinctive words of each agent's prompt (prompts/agents/*.md), strongest first.
AGENT_LABELS = {
    "ad-copy": "ad copy",
    "quiz": "quiz",
    "email-sequence": "email sequence",
    "landing-page": "landing page",
}


@dataclass
class Reply:
    """What the demo model answers: content blocks and why it stopped."""

    blocks: list[dict[str, Any]]
    stop_reason: str


# --------------------------------------------------------------------------------------
# The transport
# --------------------------------------------------------------------------------------


class _EventStream(httpx.SyncByteStream):
    """A response body produced chunk by chunk; closing it stops the generator."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()


class DemoTransport(httpx.BaseTransport):
    """Answers `POST /v1/messages` and `POST /v1/messages/count_tokens` like the API.

    `delay` is the pause in seconds before each streamed delta, so text visibly streams.
    """

    def __init__(self, delay: float = DEFAULT_DELAY):
        self.delay = delay

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return _error(404, "not_found_error", f"Not found: {request.method} {path}", request)
        if request.method != "POST":
            return _error(
                405, "invalid_request_error", f"Method {request.method} not allowed", request
            )
        request.read()
        try:
            body = json.loads(request.content or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(
                400, "invalid_request_error", "The request body is not valid JSON.", request
            )
        if not isinstance(body, dict):
            return _error(
                400, "invalid_request_error", "The request body must be a JSON object.", request
            )
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(
                400, "invalid_request_error", "messages: at least one message is required", request
            )
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error(400, "invalid_request_error", "model: Field required", request)

        input_tokens = estimate_input_tokens(body)
        if path.endswith("/count_tokens"):
            return _json(200, {"input_tokens": input_tokens}, request)
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            return _error(400, "invalid_request_error", "max_tokens: Field required", request)

        reply = respond(body)
        message = _message(body, reply, input_tokens)
        if body.get("stream"):
            return httpx.Response(
                200,
                headers={
                    "content-type": "text/event-stream; charset=utf-8",
                    "cache-control": "no-cache",
                    "request-id": _request_id(),
                },
                stream=_EventStream(self._events(message)),
                request=request,
            )
        return _json(200, message, request)

    def _events(self, message: dict[str, Any]) -> Iterator[bytes]:
        """The message as the API streams it: start, blocks in deltas, delta, stop."""
        start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
        start["usage"] = {**message["usage"], "output_tokens": 1}
        yield _sse("message_start", {"type": "message_start", "message": start})
        yield _sse("ping", {"type": "ping"})
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                opening: dict[str, Any] = {"type": "text", "text": ""}
                looks_like_json = block["text"].lstrip().startswith("{")
                pieces = (
                    _json_pieces(block["text"]) if looks_like_json else _text_pieces(block["text"])
                )
                deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
            else:
                opening = {**block, "input": {}}
                raw = json.dumps(block["input"], ensure_ascii=False)
                # A long input (an agent's answer) streams in small pieces, as a model writes.
                pieces = _json_pieces(raw) if len(raw) > 120 else _split_in(raw, 3)
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
            yield _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
            for delta in deltas:
                if self.delay > 0:
                    time.sleep(self.delay)
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _request_id() -> str:
    return f"req_demo_{secrets.token_hex(12)}"


def _json(status: int, payload: dict[str, Any], request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        status,
        headers={"content-type": "application/json", "request-id": _request_id()},
        content=json.dumps(payload, ensure_ascii=False).encode(),
        request=request,
    )


def _error(status: int, kind: str, message: str, request: httpx.Request) -> httpx.Response:
    return _json(status, {"type": "error", "error": {"type": kind, "message": message}}, request)


def _message(body: dict[str, Any], reply: Reply, input_tokens: int) -> dict[str, Any]:
    return {
        "id": f"msg_demo_{secrets.token_hex(12)}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or DEMO_MODEL_NAME,
        "content": reply.blocks,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": estimate_output_tokens(reply.blocks),
        },
    }


def _text_pieces(text: str, words: int = 3) -> list[str]:
    """Text in chunks of a few words (whitespace kept), so it streams like a model's."""
    tokens = re.findall(r"\s*\S+\s*", text) or [text]
    return ["".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]


def _json_pieces(text: str, size: int = 40) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [text]


def _split_in(text: str, parts: int) -> list[str]:
    """Text in `parts` roughly equal pieces (fewer when it is shorter)."""
    if len(text) < parts:
        return [text]
    size = math.ceil(len(text) / parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


# --------------------------------------------------------------------------------------
# Token estimates (about four characters a token)
# --------------------------------------------------------------------------------------


def _block_chars(block: Any) -> int:
    if isinstance(block, str):
        return len(block)
    if not isinstance(block, dict):
        return 0
    kind = block.get("type")
    if kind == "text":
        return len(str(block.get("text", "")))
    if kind == "thinking":
        return len(str(block.get("thinking", "")))
    if kind == "tool_use":
        return len(json.dumps(block.get("input", {})))
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return sum(_block_chars(b) for b in content)
        return len(str(content or ""))
    return 0


def estimate_input_tokens(body: dict[str, Any]) -> int:
    chars = len(_system_text(body.get("system")))
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(_block_chars(b) for b in content)
    if body.get("tools"):
        chars += len(json.dumps(body["tools"]))
    return max(1, math.ceil(chars / 4))


def estimate_output_tokens(blocks: list[dict[str, Any]]) -> int:
    return max(1, math.ceil(sum(_block_chars(b) for b in blocks) / 4))


# --------------------------------------------------------------------------------------
# Reading the request
# --------------------------------------------------------------------------------------


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return ""


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


@dataclass
class _Result:
    name: str | None
    text: str
    data: Any
    is_error: bool


def _tool_results(messages: list[dict[str, Any]]) -> list[_Result]:
    """The last message's tool results, each with the name of the tool that was called."""
    names: dict[str, str] = {}
    for message in messages:
        if message.get("role") == "assistant":
            for block in _blocks(message, "tool_use"):
                names[str(block.get("id"))] = str(block.get("name"))
    results = []
    for block in _blocks(messages[-1], "tool_result"):
        content = block.get("content")
        if isinstance(content, list):
            text = "\n".join(
                str(b.get("text", ""))
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
        else:
            text = "" if content is None else str(content)
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, ValueError):
            data = None
        results.append(
            _Result(
                names.get(str(block.get("tool_use_id"))), text, data, bool(block.get("is_error"))
            )
        )
    return results


def _find_key(data: Any, key: str) -> Any:
    """The first value stored under `key` anywhere in nested dicts and lists."""
    if isinstance(data, dict):
        if key in data:
            return data[key]
        values = list(data.values())
    elif isinstance(data, list):
        values = data
    else:
        return None
    for value in values:
        found = _find_key(value, key)
        if found is not None:
            return found
    return None


def _offers_in(result: _Result) -> list[Any] | None:
    """The offers a list_offers result lists: a list, or None when it cannot tell."""
    data = result.data
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("offers", "items", "results"):
            if isinstance(data.get(key), list):
                return data[key]
        lists = [v for v in data.values() if isinstance(v, list)]
        if lists:
            return lists[0]
    text = result.text.strip().lower()
    if not text or "no offers" in text:
        return []
    return None


def _first_offer_id(offers: list[Any]) -> int | None:
    for offer in offers:
        if isinstance(offer, dict):
            value = offer.get("id", offer.get("offer_id"))
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _json_section(text: str, heading: str) -> dict[str, Any]:
    """The JSON object under a `## Heading` line of an agent's context message."""
    marker = f"## {heading}\n"
    at = text.find(marker)
    if at < 0:
        return {}
    start = text.find("{", at + len(marker))
    if start < 0:
        return {}
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


# --------------------------------------------------------------------------------------
# Deciding what to answer
# --------------------------------------------------------------------------------------


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tool_use(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": f"toolu_demo_{secrets.token_hex(12)}",
        "name": name,
        "input": arguments,
    }


def _say(text: str) -> Reply:
    return Reply([_text(text)], "end_turn")


def respond(body: dict[str, Any]) -> Reply:
    """The demo model's answer to one Messages API request body."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    tools = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}
    system = _system_text(body.get("system"))
    tool_choice = body.get("tool_choice")
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "none":
        return _say(
            "I'm the demo model, so I'll stop here: everything made so far is saved in your workspace."
        )
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "tool":
        return _forced_answer(str(tool_choice.get("name")), system, messages)
    if not tools:
        return _say(_plain_answer(system, messages))
    if not messages or messages[-1].get("role") != "user":
        return _say(_fallback())
    results = _tool_results(messages)
    if not results:
        return _start(tools)
    return _after_tools(results, tools)


def _fallback() -> str:
    return (
        "I'm the demo model (no AI model is configured), so I can only follow a fixed "
        "script: send me a message and I'll help you write ad copy for one of your offers."
    )


def _start(tools: set[str]) -> Reply:
    intro = "I'm the demo model (no AI model is configured), so I follow a fixed script."
    if "list_offers" not in tools:
        return _say(
            f"{intro} The tools that script needs are not available right now, so all I can "
            f"do is point you to the workspace. To get real answers, {CONFIGURE_HINT}."
        )
    return Reply(
        [_text(f"{intro} Let me look at your offers."), _tool_use("list_offers", {})], "tool_use"
    )


def _after_tools(results: list[_Result], tools: set[str]) -> Reply:
    for result in results:
        if result.is_error:
            problem = result.text.strip().splitlines()[0][:200] if result.text.strip() else ""
            detail = f" ({problem.rstrip('.')})" if problem else ""
            return _say(
                f"Sorry, that step did not work out{detail}. I'm only the demo model, so I "
                "can't work around it: send a new message to start over."
            )
    for result in results:
        if isinstance(result.data, dict) and result.data.get("dismissed"):
            said = str(result.data.get("user_message") or "").strip()
            heard = f' I saw your note ("{said[:120]}"), but' if said else " But"
            return _say(
                f"Sorry, no problem, I've stopped there.{heard} I'm only the demo model and "
                "follow a fixed script, so send a new message whenever you want to start again."
            )
    result = results[0]
    name = result.name or _guess_tool(result.data)
    if name == "list_offers":
        return _offers_listed(result, tools)
    if name == "select_offer":
        return _offer_selected(result, tools)
    if isinstance(result.data, dict) and "output_id" in result.data:
        return _output_saved(name, result.data)
    return _say(
        "I'm the demo model, and my script has no next step for that. Send a new message "
        f"to go through it again, or {CONFIGURE_HINT}."
    )


def _guess_tool(data: Any) -> str | None:
    """Which tool a result came from when its tool_use is no longer in the history."""
    if isinstance(data, dict):
        if "output_id" in data:
            return data.get("agent")
        if "offer_id" in data and len(data) <= 3:
            return "select_offer"
        if isinstance(data.get("offers"), list):
            return "list_offers"
    return None


def _offers_listed(result: _Result, tools: set[str]) -> Reply:
    offers = _offers_in(result)
    if offers is not None and not offers:
        return _say(
            "You don't have any offers yet. Add one at /workspace/offers (what you sell, who it "
            "is for), then send me a message and I'll write ad copy for it. I'm the demo model, "
            "so that is the one thing my script does."
        )
    if "select_offer" in tools:
        return Reply(
            [
                _text("Which offer should we write for?"),
                _tool_use("select_offer", {"prompt": "Which offer should we write ad copy for?"}),
            ],
            "tool_use",
        )
    offer_id = _first_offer_id(offers or [])
    if offer_id is not None and "ad_copy" in tools:
        return _write_ad_copy(offer_id, "I'll take your first offer.")
    return _say(
        "I found your offers, but the demo script can't ask you to pick one right now. "
        f"I'm only the demo model; to go further, {CONFIGURE_HINT}."
    )


def _offer_selected(result: _Result, tools: set[str]) -> Reply:
    offer_id = _find_key(result.data, "offer_id")
    if not isinstance(offer_id, int) or isinstance(offer_id, bool):
        return _say(
            "Sorry, I couldn't tell which offer you picked. I'm only the demo model: send a "
            "new message to try again."
        )
    if "ad_copy" not in tools:
        return _say(
            "Great choice. The ad copy writer isn't available right now, though, and I'm only "
            f"the demo model. To go further, {CONFIGURE_HINT}."
        )
    return _write_ad_copy(offer_id, "Great choice.")


def _write_ad_copy(offer_id: int, opening: str) -> Reply:
    return Reply(
        [
            _text(f"{opening} I'll ask the ad copy writer for three variants."),
            _tool_use(
                "ad_copy",
                {
                    "instructions": "Write three ad variants for this offer, one each from the "
                    "angle of the pain, the outcome, and a short story. Keep the hooks short "
                    "and concrete.",
                    "offer_id": offer_id,
                },
            ),
        ],
        "tool_use",
    )


def _output_saved(name: str | None, data: dict[str, Any]) -> Reply:
    slug = str(data.get("agent") or (name or "").replace("_", "-"))
    label = AGENT_LABELS.get(slug, "result")
    title = str(data.get("title") or "").strip() or "untitled"
    output = data.get("output") if isinstance(data.get("output"), dict) else {}
    parts = {
        "variants": "variant",
        "questions": "question",
        "emails": "email",
        "sections": "section",
    }
    size = ""
    for key, noun in parts.items():
        if isinstance(output.get(key), list) and output[key]:
            count = len(output[key])
            size = f" It has {count} {noun}{'s' if count != 1 else ''}, shown on the card above."
            break
    noun = "Your ad copy is" if slug == "ad-copy" else f"Your {label} is"
    return _say(
        f"{noun} saved: **{title}**.{size} You can find it again under Outputs in your "
        f"workspace. This was the demo model; {CONFIGURE_HINT}."
    )


def _plain_answer(system: str, messages: list[dict[str, Any]]) -> str:
    """Calls outside the flow (summaries and the like): a short sensible text."""
    user_texts = [
        t for m in messages if m.get("role") == "user" and (t := _message_text(m).strip())
    ]
    asked = " ".join(f"{system}\n{user_texts[-1] if user_texts else ''}".lower().split())
    if "summar" in asked:
        first = " ".join((user_texts[0] if user_texts else "").split())
        topic = f' It started with "{first[:120]}".' if first else ""
        return (
            "Summary by the demo model: the person and the demo model went through the "
            f"scripted ad copy flow.{topic}"
        )
    if "title" in asked:
        return "Demo conversation"
    return _fallback()


# --------------------------------------------------------------------------------------
# Agent outputs
# --------------------------------------------------------------------------------------


def _forced_answer(tool_name: str, system: str, messages: list[dict[str, Any]]) -> Reply:
    """A structured call: an agent's answer (the forced tool names the agent, as in
    "submit_ad_copy") as that tool's input; anything else gets a plain sentence, as a
    model that cannot do it would answer."""
    if tool_name == "submit_title":
        return Reply([_tool_use(tool_name, {"title": _demo_title(messages)})], "tool_use")
    slug = tool_name.removeprefix("submit_").replace("_", "-")
    if slug not in AGENT_LABELS:
        return _say(_plain_answer(system, messages))
    context = "\n\n".join(_message_text(m) for m in messages if m.get("role") == "user")
    output = agent_output(slug, _json_section(context, "Offer"), _json_section(context, "Persona"))
    return Reply([_tool_use(tool_name, output)], "tool_use")


def _demo_title(messages: list[dict[str, Any]]) -> str:
    """A chat's title (app/chat/titles.py): the first words of the person's first message."""
    context = "\n".join(_message_text(m) for m in messages if m.get("role") == "user")
    marker = "## The person's first message\n"
    said = context.split(marker, 1)[1].split("\n## ", 1)[0] if marker in context else context
    words = said.split()[:6]
    return _cut(" ".join(words).rstrip(" ,.:;!?"), 60) or "Demo conversation"


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[: limit - 3].rstrip(" ,.:;") + "..."


def _sentence(text: Any) -> str:
    text = " ".join(str(text or "").split())
    if text and text[-1] not in ".!?":
        text += "."
    return text


def agent_output(
    slug: str, offer: dict[str, Any], persona: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A plausible, schema-valid output of one agent for an offer."""
    name = " ".join(str(offer.get("name") or "").split()) or "Your offer"
    details = _Details(
        name=name,
        description=_sentence(offer.get("description")),
        audience=_sentence(offer.get("audience")),
        persona=" ".join(str((persona or {}).get("name") or "").split()),
    )
    builders = {
        "ad-copy": _ad_copy,
        "quiz": _quiz,
        "email-sequence": _email_sequence,
        "landing-page": _landing_page,
    }
    return builders[slug](details)


@dataclass
class _Details:
    name: str
    description: str
    audience: str
    persona: str

    @property
    def who(self) -> str:
        return self.audience or "People like you, who want this handled well."

    @property
    def what(self) -> str:
        return self.description or f"{self.name} is built for exactly this."


def _ad_copy(d: _Details) -> dict[str, Any]:
    reader = f" for {d.persona}" if d.persona else ""
    return {
        "title": f"{d.name}: three ad angles",
        "angle_notes": f"Demo model sample{reader}: one ad each for the pain, the outcome "
        "and a short story. Swap in your own words before running them.",
        "variants": [
            {
                "angle": "Pain",
                "hook": "Your week fills up before you get to what matters.",
                "primary_text": "You know the feeling. The day starts and it already belongs "
                f"to someone else.\n\n{d.who}\n\n{d.what}\n\nIf that sounds like the help you "
                "have been missing, take a closer look below.",
                "headline": _cut(f"{d.name}: get your time back", 60),
                "call_to_action": "Learn more",
            },
            {
                "angle": "Outcome",
                "hook": "Picture next month with this finally handled.",
                "primary_text": f"Imagine this part of your work simply running.\n\n{d.what}\n\n"
                "Less second-guessing, more room for the work only you can do. See how "
                f"{d.name} works.",
                "headline": _cut(f"Make it simple with {d.name}", 60),
                "call_to_action": "See how it works",
            },
            {
                "angle": "Story",
                "hook": "It started with one more evening lost to the same problem.",
                "primary_text": "Most people who find us have tried to fix this alone for a "
                f"while. Then they decide it deserves a real answer.\n\n{d.what}\n\n"
                "Your story can take the same turn. Start with the link below.",
                "headline": _cut(f"{d.name}: start your turnaround", 60),
                "call_to_action": "Get started",
            },
        ],
    }


def _quiz(d: _Details) -> dict[str, Any]:
    keys = ("stretched", "stuck", "ready")

    def option(label: str, main: str, side: str | None = None) -> dict[str, Any]:
        scores = {key: 0 for key in keys}
        scores[main] = 3
        if side:
            scores[side] = 1
        return {"label": label, "scores": scores}

    return {
        "title": f"Which path fits you? A quiz from {d.name}",
        "intro": "Five quick questions, no wrong answers. Find out where you stand and what "
        f"would help most right now. (A demo model sample for {d.name}.)",
        "questions": [
            {
                "question": "What does a typical Monday look like for you?",
                "options": [
                    option("Back to back from the first minute", "stretched", "stuck"),
                    option("Busy, but the same problems as last week", "stuck"),
                    option("Planned, and I want to level up", "ready", "stuck"),
                ],
            },
            {
                "question": "When this problem comes up, what do you usually do?",
                "options": [
                    option("Push it to later, again", "stretched"),
                    option("Try a new fix that doesn't last", "stuck", "stretched"),
                    option("Look for someone who has solved it", "ready"),
                ],
            },
            {
                "question": "Which sentence sounds most like you?",
                "options": [
                    option("I don't have time to think about it", "stretched"),
                    option("I've tried, it just doesn't stick", "stuck"),
                    option("I know what I want, I need the right help", "ready", "stuck"),
                ],
            },
            {
                "question": "What would feel like a win a month from now?",
                "options": [
                    option("One calm hour a day", "stretched", "ready"),
                    option("A routine that finally holds", "stuck"),
                    option("Clear, visible progress", "ready"),
                ],
            },
            {
                "question": "How do you like to get help?",
                "options": [
                    option("Quick and done for me", "stretched"),
                    option("Step by step, with a plan", "stuck", "ready"),
                    option("Hands on, with someone to ask", "ready"),
                ],
            },
        ],
        "results": [
            {
                "key": "stretched",
                "headline": "You're stretched thin",
                "description": "You are carrying a lot and this keeps sliding down the list. "
                f"It's not a motivation problem, it's a capacity one. {d.what}",
                "call_to_action": f"See how {d.name} takes it off your plate",
            },
            {
                "key": "stuck",
                "headline": "You're stuck in a loop",
                "description": "You've tried to fix this more than once and it keeps coming "
                f"back. What's missing is a structure that lasts. {d.what}",
                "call_to_action": f"Break the loop with {d.name}",
            },
            {
                "key": "ready",
                "headline": "You're ready for the next step",
                "description": "You know what you want and you're ready to act. The right "
                f"help now saves you months. {d.what}",
                "call_to_action": f"Start with {d.name}",
            },
        ],
    }


def _email_sequence(d: _Details) -> dict[str, Any]:
    sign_off = f"\n\nWarmly,\nThe {d.name} team"
    return {
        "title": f"{d.name}: welcome sequence",
        "goal": f"Turn new subscribers into people who try {d.name}.",
        "emails": [
            {
                "day": 0,
                "subject": _cut(f"Welcome to {d.name}", 80),
                "preview": "Here's what to expect, and one small thing to try today.",
                "body": f"Hi there,\n\nThanks for joining us. {d.what}\n\nOver the next few "
                "days we'll send a handful of short emails, each with one useful idea. Today's: "
                "write down the one thing you'd most like to fix this month. We'll come back to "
                f"it.{sign_off}",
            },
            {
                "day": 2,
                "subject": "The real problem isn't what you think",
                "preview": "Why the usual fixes don't stick.",
                "body": "Hi again,\n\nMost people try to solve this with more effort. It rarely "
                "works, because the problem isn't effort, it's the system around it.\n\n"
                f"{d.who} We hear that again and again.\n\nTomorrow: what changes when the "
                f"system changes.{sign_off}",
            },
            {
                "day": 4,
                "subject": "What changes when the system changes",
                "preview": "A short story from someone like you.",
                "body": "Hi,\n\n[Customer story: the situation before, what they tried, and "
                "what changed.]\n\nThe details differ for everyone, but the pattern is the "
                f"same: a clear structure and a little support.{sign_off}",
            },
            {
                "day": 6,
                "subject": "But will it work for me?",
                "preview": "The three questions people ask before they start.",
                "body": "Hi,\n\nBefore starting, people usually ask: Do I have time for this? "
                "Is it right for my situation? What if I fall off?\n\nFair questions. "
                f"{d.what} Reply to this email with yours and we'll answer it personally."
                f"{sign_off}",
            },
            {
                "day": 8,
                "subject": _cut(f"Your invitation to {d.name}", 80),
                "preview": "Everything you need to start, in one place.",
                "body": f"Hi,\n\nIf the last few emails rang true, this is your moment. {d.what}"
                f"\n\nYou can start today. Follow the link to see how {d.name} works and take "
                f"the first step.{sign_off}",
            },
        ],
    }


def _landing_page(d: _Details) -> dict[str, Any]:
    return {
        "title": f"{d.name} landing page",
        "hero": {
            "headline": f"Get this handled, for good, with {d.name}",
            "subheadline": d.what,
            "call_to_action": "Get started",
        },
        "sections": [
            {
                "heading": "Sound familiar?",
                "body": f"{d.who} You've tried to fix it on your own, and it keeps coming back.",
            },
            {
                "heading": f"Meet {d.name}",
                "body": f"{d.what} It gives you a clear structure and the support to stick with it.",
            },
            {
                "heading": "What you get",
                "body": "Concrete changes you notice in the first weeks.",
                "bullets": [
                    "A clear plan that fits your week",
                    "Less time lost to the same old problem",
                    "Support when you get stuck",
                    "Progress you can see",
                ],
            },
            {
                "heading": "How it works",
                "body": "Three simple steps.",
                "bullets": [
                    "Tell us where you are today",
                    "Get a plan made for your situation",
                    "Follow it, with help along the way",
                ],
            },
            {
                "heading": "What people say",
                "body": "[Customer quote about the result] [Customer name and role]",
            },
        ],
        "faq": [
            {
                "question": "I'm short on time. Is this for me?",
                "answer": f"{d.name} is built for busy people: it fits around your week "
                "instead of adding to it.",
            },
            {
                "question": "What if I've tried things like this before?",
                "answer": "Most people have. The difference is a structure that lasts and "
                "support when it gets hard.",
            },
            {
                "question": "How much does it cost?",
                "answer": "You'll see the full price before you commit to anything.",
            },
            {
                "question": "Will it work for my situation?",
                "answer": "Tell us where you are and we'll be honest about whether it fits.",
            },
        ],
        "final_call_to_action": f"Get this handled for good. Start with {d.name} today.",
    }
