"""A minimal fake Anthropic Messages API whose tokens are their own send times.

    python -m bench.stamped_model --port 8123 --tps 60 --tokens 300 --first-token-delay 0

Every `POST /v1/messages` gets one text block (stop reason `end_turn`). Streamed
(`"stream": true`), each `text_delta` carries ONE token: the wall-clock time it was written,
`f"{time.time_ns()} "`, so a reader subtracts the stamp from its own clock to get that
token's latency. Tokens leave at `--tps` per stream on an absolute schedule (a late token
does not push the next ones back), `--tokens` per reply, after `--first-token-delay`
seconds. The last user message may override both for its reply: `stamps=N` and
`delay=SECONDS` anywhere in its text (a benchmark's short turns beside its long streams, on
one model process). `card=ask` in it asks instead (streamed): one `ask_user` tool call
with two options, so the app shows a card; the call after its answer (a tool result, no
text) gets the stamps as usual. Non-streamed calls get the same text at once;
`/v1/messages/count_tokens` a count. Nothing is validated (tests/fake_model.py does that).

Stdlib only, one asyncio loop, HTTP/1.1 keep-alive with chunked replies: hundreds of
concurrent streams. The process exits by itself after `--max-seconds`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import secrets
import time

READ_TIMEOUT = 60.0  # an idle keep-alive connection is closed after this
MAX_HEADER_BYTES = 64 * 1024


def sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


# The text_delta event around a token, split so a token costs one bytes concatenation.
DELTA_HEAD = (
    b"event: content_block_delta\ndata: "
    b'{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "'
)
DELTA_TAIL = b'"}}\n\n'


STAMPS = re.compile(r"\bstamps=(\d+)")
DELAY = re.compile(r"\bdelay=(\d+(?:\.\d+)?)")
CARD = re.compile(r"\bcard=ask\b")
CARD_INPUT = {
    "question": "Which quarter?",
    "options": [{"value": "q1", "label": "Q1"}, {"value": "q2", "label": "Q2"}],
}


def last_user_text(body: dict) -> str:
    """The text of the request's last user message (a string or a list of blocks)."""
    messages = body.get("messages")
    for entry in reversed(messages if isinstance(messages, list) else []):
        if not isinstance(entry, dict) or entry.get("role") != "user":
            continue
        content = entry.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(
                str(block.get("text", "")) for block in content if isinstance(block, dict)
            )
        return ""
    return ""


def stamp() -> bytes:
    return b"%d " % time.time_ns()


def message(model: str, text: str, output_tokens: int) -> dict:
    return {
        "id": f"msg_bench_{secrets.token_hex(8)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": output_tokens},
    }


def opening_events(model: str) -> bytes:
    start = message(model, "", 1)
    start.update(content=[], stop_reason=None)
    return sse("message_start", {"type": "message_start", "message": start}) + sse(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )


def closing_events(tokens: int) -> bytes:
    return (
        sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        + sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": tokens},
            },
        )
        + sse("message_stop", {"type": "message_stop"})
    )


class StampedModel:
    def __init__(self, tps: float, tokens: int, first_token_delay: float):
        self.interval = 1.0 / tps
        self.tokens = tokens
        self.first_token_delay = first_token_delay

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: requests one after another while the client keeps it open."""
        try:
            while await self.answer_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except TimeoutError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def reply_shape(self, body: dict) -> tuple[int, float]:
        """Tokens and first-token delay for this request: the defaults, unless its last
        user message says `stamps=N` / `delay=SECONDS`."""
        text = last_user_text(body)
        tokens = STAMPS.search(text)
        delay = DELAY.search(text)
        return (
            int(tokens.group(1)) if tokens else self.tokens,
            float(delay.group(1)) if delay else self.first_token_delay,
        )

    async def answer_one(self, reader, writer) -> bool:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
        headers = dict(
            (name.strip().lower(), value.strip())
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        )
        length = int(headers.get("content-length") or 0)
        raw = await asyncio.wait_for(reader.readexactly(length), READ_TIMEOUT) if length else b""
        body = parse_json(raw)
        path = path.split("?", 1)[0].rstrip("/")
        if method != "POST" or not path.startswith("/v1/messages"):
            await self.send_json(
                writer,
                404,
                {"type": "error", "error": {"type": "not_found_error", "message": path}},
            )
        elif path.endswith("/count_tokens"):
            await self.send_json(writer, 200, {"input_tokens": 10})
        elif body.get("stream") and CARD.search(last_user_text(body)):
            await self.stream_card(writer, str(body.get("model") or "bench"))
        elif body.get("stream"):
            await self.stream(writer, str(body.get("model") or "bench"), *self.reply_shape(body))
        else:
            tokens, _ = self.reply_shape(body)
            text = "".join(stamp().decode() for _ in range(tokens))
            await self.send_json(
                writer, 200, message(str(body.get("model") or "bench"), text, tokens)
            )
        return headers.get("connection", "").lower() != "close"

    async def send_json(self, writer, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        writer.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"request-id: req_bench\r\n\r\n%s"
            % (status, b"OK" if status == 200 else b"Error", len(data), data)
        )
        await writer.drain()

    async def stream(self, writer, model: str, tokens: int, first_token_delay: float) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\nrequest-id: req_bench\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + chunk(opening_events(model))
        )
        await writer.drain()
        loop = asyncio.get_running_loop()
        start = loop.time() + first_token_delay
        for index in range(tokens):
            delay = start + index * self.interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(chunk(DELTA_HEAD + stamp() + DELTA_TAIL))
            await writer.drain()
        writer.write(chunk(closing_events(tokens)) + b"0\r\n\r\n")
        await writer.drain()

    async def stream_card(self, writer, model: str) -> None:
        """One `ask_user` call (`CARD_INPUT`), stop reason `tool_use`."""
        start = message(model, "", 1)
        start.update(content=[], stop_reason=None)
        block = {"type": "tool_use", "id": f"toolu_{secrets.token_hex(8)}", "name": "ask_user"}
        events = sse("message_start", {"type": "message_start", "message": start})
        events += sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
        )
        delta = {"type": "input_json_delta", "partial_json": json.dumps(CARD_INPUT)}
        events += sse(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
        events += sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        events += sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
        )
        events += sse("message_stop", {"type": "message_stop"})
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"cache-control: no-cache\r\nrequest-id: req_bench\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + chunk(events) + b"0\r\n\r\n"
        )
        await writer.drain()


def parse_json(raw: bytes) -> dict:
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


async def serve(args: argparse.Namespace) -> None:
    model = StampedModel(args.tps, args.tokens, args.first_token_delay)
    server = await asyncio.start_server(
        model.handle, args.host, args.port, backlog=2048, limit=MAX_HEADER_BYTES
    )
    port = server.sockets[0].getsockname()[1]
    print(f"stamped model listening on http://{args.host}:{port}", flush=True)
    async with server:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.serve_forever(), args.max_seconds)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.stamped_model", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--tps", type=float, default=60.0, help="tokens per second per stream")
    parser.add_argument("--tokens", type=int, default=300, help="tokens per reply")
    parser.add_argument("--first-token-delay", type=float, default=0.0, help="seconds")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="exit after this")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args))


if __name__ == "__main__":
    main()
