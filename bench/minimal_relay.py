"""The minimal relay: the floor the app's relay is measured against, written only to find
the limit of this machine and this stack.

    ANTHROPIC_BASE_URL=http://127.0.0.1:8123 \
        .venv/bin/gunicorn -k gevent -w 1 -b 127.0.0.1:8000 bench.minimal_relay:app

gunicorn with one gevent worker; the sync `anthropic` SDK iterating the raw events of
`messages.create(stream=True)` in a greenlet per run; a queue per socket whose waiting items
are all drained into one frame (sent at once when the socket is idle); JSON frames. No
persistence, no auth, no rendering, no history. It speaks just enough of the app's API for
the same benchmark client to drive both:

- `POST /api/chats` -> 201 `{id}`;
- `/ws/chats/<id>` (flask-sock, the app's socket library, with the app's ping interval):
  `textDelta` and `done` frames;
- `POST /api/chats/<id>/loop` `{message}` -> 202 `{runId}`; the model's text goes to every
  socket of the chat.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections import defaultdict

import anthropic
import gevent
from flask import Flask, jsonify, request
from flask_sock import Sock
from gevent.queue import Empty, Queue

WAIT_SECONDS = 1.0  # a socket notices its client left within this (as the app's does)
DONE = object()

app = Flask(__name__)
app.config["SOCK_SERVER_OPTIONS"] = {"ping_interval": 25, "max_message_size": 64 * 1024}
sock = Sock(app)
model = anthropic.Anthropic(
    base_url=os.environ.get("ANTHROPIC_BASE_URL"),
    api_key=os.environ.get("ANTHROPIC_API_KEY") or "bench",
    max_retries=0,
)
chat_ids = itertools.count(1)
subscribers: dict[int, set[Queue]] = defaultdict(set)
lock = threading.Lock()


def publish(chat_id: int, item) -> None:
    with lock:
        queues = list(subscribers.get(chat_id, ()))
    for queue in queues:
        queue.put(item)


def stream_reply(chat_id: int, message: str) -> None:
    """Read the model's stream (raw events) and publish each text delta."""
    try:
        stream = model.messages.create(
            model="bench",
            max_tokens=8192,
            messages=[{"role": "user", "content": message}],
            stream=True,
        )
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                publish(chat_id, event.delta.text)
    finally:
        publish(chat_id, DONE)


@app.post("/api/chats")
def create_chat():
    return jsonify({"id": next(chat_ids)}), 201


@app.post("/api/chats/<int:chat_id>/loop")
def loop(chat_id: int):
    message = (request.get_json(silent=True) or {}).get("message") or "Hello"
    gevent.spawn(stream_reply, chat_id, message)
    return jsonify({"runId": chat_id}), 202


@sock.route("/ws/chats/<int:chat_id>")
def chat_socket(ws, chat_id: int):
    queue: Queue = Queue()
    with lock:
        subscribers[chat_id].add(queue)
    try:
        while ws.connected:
            try:
                batch = [queue.get(timeout=WAIT_SECONDS)]
            except Empty:
                continue
            while not queue.empty():
                batch.append(queue.get_nowait())
            text = "".join(item for item in batch if item is not DONE)
            if text:
                ws.send(json.dumps({"type": "textDelta", "runId": chat_id, "text": text}))
            if DONE in batch:
                ws.send(json.dumps({"type": "done", "runId": chat_id, "status": "completed"}))
    finally:
        with lock:
            subscribers[chat_id].discard(queue)
