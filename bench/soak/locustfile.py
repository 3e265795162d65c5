"""The soak's traffic, for Locust (run by `python -m bench.soak`, never imported by app/ or
the suite: Locust monkey-patches gevent on import).

Two kinds of user, each at a steady rate (`constant_throughput`):

- `ChatUser` (HTTP, bearer token): new chats, turns (`POST /api/chats/<id>/loop`, then
  `GET /api/runs/<id>` until the run ends; the whole turn is one `TURN` entry), uploads,
  search and exports. A chat takes at most `TURNS_PER_CHAT` turns, then the person starts
  another: a 30-minute soak must not turn into a test of ever-longer histories.
- `SocketUser`: joins a chat's socket (`/ws/chats/<id>?format=json`), asks its catch-up,
  sometimes sends a turn and reads it to its `done` frame, and leaves.

Every request (Locust's own and the socket's, reported to `events.request`) is also
written as one line to `SOAK_SAMPLES` (`at, kind, name, milliseconds, error`), from which
the driver judges p99 over time and counts errors.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from pathlib import Path

import websocket  # websocket-client: its sockets are gevent's once Locust has patched
from locust import HttpUser, constant_throughput, events, task
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

TOKENS: list[str] = json.loads(Path(os.environ["SOAK_TOKENS"]).read_text())
HTTP_RATE = float(os.environ.get("SOAK_HTTP_RATE", "0.5"))  # tasks per second per user
SOCKET_RATE = float(os.environ.get("SOAK_SOCKET_RATE", "0.25"))
TURN_TEXT = "soak turn about invoices stamps=30 delay=0.1"
CARD_TEXT = "soak question card=ask"  # the stamped model asks with an ask_user card
TURNS_PER_CHAT = 8
TURN_SECONDS = 60.0
POLL_SECONDS = 0.25  # a script waiting on its run, as a person's client would
FINISHED = {"completed", "error", "cancelled", "awaiting"}
UPLOAD = ("soak-notes.txt", b"Soak notes: invoices, receipts and quarterly totals.\n" * 20)

_next_token = itertools.count()
# Open for the whole Locust process: one line per request, flushed per line.
_samples = Path(os.environ["SOAK_SAMPLES"]).open("a", buffering=1)  # noqa: SIM115


@events.request.add_listener
def record(request_type, name, response_time, exception=None, **_kwargs) -> None:
    error = "" if exception is None else str(exception).replace("\t", " ").splitlines()[0][:200]
    _samples.write(f"{time.time():.3f}\t{request_type}\t{name}\t{response_time:.1f}\t{error}\n")


def report(kind: str, name: str, began: float, error: Exception | None = None) -> None:
    events.request.fire(
        request_type=kind,
        name=name,
        response_time=(time.perf_counter() - began) * 1000,
        response_length=0,
        exception=error,
        context={},
    )


class TurnFailed(Exception):
    pass


def resend_on_closed_keep_alive(client) -> None:
    """Send a request again, once, when its pooled keep-alive connection was closed by the
    server as it went out (gunicorn closes one idle for `keepalive` seconds; a client idle
    about that long races it), as browsers do. Only connection failures: an answer, any
    status, is never sent again; a duplicate that did reach the server shows as its own
    refusal (409 for a second turn), so nothing is hidden."""
    retry = Retry(total=1, connect=1, read=1, status=0, other=0, allowed_methods=None)
    client.mount("http://", HTTPAdapter(max_retries=retry))


class ChatUser(HttpUser):
    wait_time = constant_throughput(HTTP_RATE)
    fixed_count = int(os.environ.get("SOAK_HTTP_USERS", "8"))

    def on_start(self) -> None:
        self.client.headers["Authorization"] = f"Bearer {TOKENS[next(_next_token) % len(TOKENS)]}"
        resend_on_closed_keep_alive(self.client)
        self.chats: list[int] = []
        self.turns = 0
        self.new_chat()

    def expect(self, response, status: int) -> dict:
        if response.status_code != status:
            reason = response.error if response.status_code == 0 else response.text[:120]
            response.failure(f"HTTP {response.status_code}: {reason}")
            return {}
        response.success()
        return response.json() if "json" in response.headers.get("Content-Type", "") else {}

    @task(1)
    def new_chat(self) -> None:
        with self.client.post(
            "/api/chats", json={"title": "soak"}, name="/api/chats", catch_response=True
        ) as response:
            chat = self.expect(response, 201).get("id")
        if chat:
            self.chats = [*self.chats[-4:], chat]
            self.turns = 0

    @task(4)
    def turn(self) -> None:
        if self.turns >= TURNS_PER_CHAT or not self.chats:
            self.new_chat()
        if not self.chats:
            return
        began = time.perf_counter()
        try:
            self._turn(self.chats[-1])
        except TurnFailed as error:
            report("TURN", "turn (loop to done)", began, error)
        else:
            report("TURN", "turn (loop to done)", began)
        self.turns += 1

    @task(1)
    def card(self) -> None:
        """A turn that ends on a card, the card's answer, and the run it starts."""
        if self.turns >= TURNS_PER_CHAT - 1 or not self.chats:
            self.new_chat()
        if not self.chats:
            return
        chat = self.chats[-1]
        began = time.perf_counter()
        try:
            self._turn(chat, {"message": CARD_TEXT}, until="awaiting")
            self._turn(
                chat,
                {
                    "toolResponse": {
                        "toolUseId": self._waiting_card(chat),
                        "result": {"value": "q1"},
                    }
                },
            )
        except TurnFailed as error:
            report("CARD", "ask, answer, done", began, error)
        else:
            report("CARD", "ask, answer, done", began)
        self.turns += 2

    def _waiting_card(self, chat: int) -> str:
        with self.client.get(
            f"/api/chats/{chat}/messages?after=0",
            name="/api/chats/[id]/messages",
            catch_response=True,
        ) as response:
            rows = self.expect(response, 200).get("messages", [])
        for row in reversed(rows):
            card = row.get("card") or {}
            if row.get("kind") == "card" and card.get("status") == "awaiting":
                return card["toolUseId"]
        raise TurnFailed("no card waiting after the run paused")

    def _turn(self, chat: int, body: dict | None = None, until: str = "completed") -> None:
        with self.client.post(
            f"/api/chats/{chat}/loop",
            json=body or {"message": TURN_TEXT},
            name="/api/chats/[id]/loop",
            catch_response=True,
        ) as response:
            run = self.expect(response, 202).get("runId")
        if not run:
            raise TurnFailed("the loop route refused the turn")
        deadline = time.monotonic() + TURN_SECONDS
        while time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            with self.client.get(
                f"/api/runs/{run}", name="/api/runs/[id]", catch_response=True
            ) as response:
                status = self.expect(response, 200).get("status")
            if status in FINISHED:
                if status != until:
                    raise TurnFailed(f"run {status}")
                return
        raise TurnFailed(f"run still going after {TURN_SECONDS:.0f} s")

    @task(1)
    def upload(self) -> None:
        chat = random.choice(self.chats)
        with self.client.post(
            f"/api/chats/{chat}/attachments",
            files={"file": (UPLOAD[0], UPLOAD[1], "text/plain")},
            name="/api/chats/[id]/attachments",
            catch_response=True,
        ) as response:
            self.expect(response, 201)

    @task(2)
    def search(self) -> None:
        query = random.choice(("invoices", "quarterly totals", "soak", "receipts"))
        with self.client.get(
            "/api/search", params={"q": query, "limit": 20}, name="/api/search", catch_response=True
        ) as response:
            self.expect(response, 200)

    @task(1)
    def export(self) -> None:
        chat = random.choice(self.chats)
        kind = random.choice(("md", "json"))
        with self.client.get(
            f"/api/chats/{chat}/export?format={kind}",
            name=f"/api/chats/[id]/export?format={kind}",
            catch_response=True,
        ) as response:
            self.expect(response, 200)


class SocketUser(HttpUser):
    """Joins and leaves chats' sockets (websocket-client over gevent), reporting each step
    to Locust as a request of type `WS`."""

    wait_time = constant_throughput(SOCKET_RATE)
    fixed_count = int(os.environ.get("SOAK_SOCKET_USERS", "4"))

    def on_start(self) -> None:
        self.token = TOKENS[next(_next_token) % len(TOKENS)]
        self.client.headers["Authorization"] = f"Bearer {self.token}"
        resend_on_closed_keep_alive(self.client)
        self.chat = 0
        self.turns = 0

    def ensure_chat(self) -> int:
        if self.chat and self.turns < TURNS_PER_CHAT:
            return self.chat
        with self.client.post(
            "/api/chats", json={"title": "soak socket"}, name="/api/chats", catch_response=True
        ) as response:
            if response.status_code != 201:
                response.failure(f"HTTP {response.status_code}: {response.error or ''}")
                return 0
            self.chat, self.turns = response.json()["id"], 0
        return self.chat

    def join(self, chat: int) -> websocket.WebSocket | None:
        began = time.perf_counter()
        origin = self.host.rstrip("/")
        try:
            socket = websocket.create_connection(
                f"{origin.replace('http', 'ws', 1)}/ws/chats/{chat}?format=json",
                header=[f"Authorization: Bearer {self.token}"],
                origin=origin,
                timeout=TURN_SECONDS,
            )
            socket.send(json.dumps({"after": 0}))
            read_until(socket, "conversation")
        except (OSError, websocket.WebSocketException, TurnFailed) as error:
            report("WS", "join + catch-up", began, error)
            return None
        report("WS", "join + catch-up", began)
        return socket

    @task(2)
    def join_turn_leave(self) -> None:
        chat = self.ensure_chat()
        socket = self.join(chat) if chat else None
        if socket is None:
            return
        began = time.perf_counter()
        try:
            with self.client.post(
                f"/api/chats/{chat}/loop",
                json={"message": TURN_TEXT},
                name="/api/chats/[id]/loop",
                catch_response=True,
            ) as response:
                if response.status_code != 202:
                    response.failure(f"HTTP {response.status_code}: {response.error or ''}")
                    raise TurnFailed(f"loop: HTTP {response.status_code}")
            frame = read_until(socket, "done")
            if frame.get("status") != "completed":
                raise TurnFailed(f"run {frame.get('status')}")
        except (OSError, websocket.WebSocketException, TurnFailed) as error:
            report("WS", "turn over the socket", began, error)
        else:
            report("WS", "turn over the socket", began)
        finally:
            self.turns += 1
            socket.close()

    @task(1)
    def join_leave(self) -> None:
        chat = self.ensure_chat()
        socket = self.join(chat) if chat else None
        if socket is not None:
            socket.close()


def read_until(socket: websocket.WebSocket, kind: str) -> dict:
    """Frames until one of type `kind` (an `error` frame fails the step)."""
    deadline = time.monotonic() + TURN_SECONDS
    while time.monotonic() < deadline:
        frame = json.loads(socket.recv())
        if frame.get("type") == kind:
            return frame
        if frame.get("type") == "error":
            raise TurnFailed(f"error frame {frame.get('code')}")
    raise TurnFailed(f"no {kind} frame in {TURN_SECONDS:.0f} s")
