"""What a run emits while it works. The loop only emits these; the streaming layer turns
them into socket frames (HTML or JSON). Each event knows its wire form (docs/CONTRACT.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, Literal, get_args

TimelineStage = Literal["resolving_context", "writing", "presenting"]
TimelineState = Literal["started", "done"]
WaitState = Literal["thinking", "retrying"]
# Why a model call is retried (app.llm.errors.retry_reason): the server is busy (overloaded
# or rate-limited), failed, took too long, or could not be reached.
RetryReason = Literal["busy", "server_error", "timeout", "unreachable"]


@dataclass(frozen=True)
class TextDelta:
    run_id: int
    text: str
    kind: Literal["textDelta"] = "textDelta"


@dataclass(frozen=True)
class HostTurn:
    """A tool-calling turn's text is complete: the live segment closes."""

    run_id: int
    text: str
    kind: Literal["hostTurn"] = "hostTurn"


@dataclass(frozen=True)
class Timeline:
    run_id: int
    stage: TimelineStage
    state: TimelineState
    agent: str | None = None
    detail: str | None = None
    kind: Literal["timeline"] = "timeline"


@dataclass(frozen=True)
class AgentToken:
    run_id: int
    agent: str
    text: str
    kind: Literal["agentToken"] = "agentToken"


@dataclass(frozen=True)
class ToolCallCard:
    run_id: int
    tool_use_id: str
    tool: str
    card: dict[str, Any]
    kind: Literal["toolCall"] = "toolCall"


@dataclass(frozen=True)
class RowPersisted:
    row: dict[str, Any]
    run_id: int | None = None
    kind: Literal["message"] = "message"


@dataclass(frozen=True)
class Done:
    run_id: int
    status: str
    kind: Literal["done"] = "done"


@dataclass(frozen=True)
class RunError:
    code: str
    message: str
    run_id: int | None = None
    kind: Literal["error"] = "error"


@dataclass(frozen=True)
class Status:
    """The run waits on the model with nothing of this model call shown yet: `thinking`,
    or `retrying` (the call failed in a way that is retried, for `reason`; any text of
    this call streamed so far is discarded). `since`: when the wait began, in epoch
    milliseconds. Text, a timeline step, a card or a row ends the wait."""

    run_id: int
    state: WaitState
    since: int
    reason: RetryReason | None = None
    kind: Literal["status"] = "status"


@dataclass(frozen=True)
class Keepalive:
    run_id: int
    kind: Literal["keepalive"] = "keepalive"


@dataclass(frozen=True)
class ConversationChanged:
    """Title or status changed: the conversation list updates live."""

    conversation: dict[str, Any] = field(default_factory=dict)
    kind: Literal["conversation"] = "conversation"


@dataclass(frozen=True)
class BranchChanged:
    """Another branch of the conversation is shown (regenerate, edit, a switch; and the
    end of a regenerate or edit run, whose rows were pushed without their siblings).
    Published empty; each socket fills in the shown branch as it sends it."""

    leaf: int | None = None
    version: str | None = None
    messages: list[dict[str, Any]] | None = None
    kind: Literal["branch"] = "branch"


@dataclass(frozen=True)
class ConversationDeleted:
    """A chat of the person was deleted: every socket of theirs drops it from the list, and
    a page showing it says so (and closes its socket)."""

    conversation_id: int
    kind: Literal["conversationDeleted"] = "conversationDeleted"


@dataclass(frozen=True)
class QueueChanged:
    """The chat's queue changed (a message queued, removed, or sent as the next run):
    every open page shows it again. `items`: the queue now, oldest first."""

    items: list[dict[str, Any]] = field(default_factory=list)
    kind: Literal["queue"] = "queue"


@dataclass(frozen=True)
class AccessEnded:
    """Some of a person's ways in ended, so their sockets opened by it close (1008).
    Published to the person (every process's sockets of theirs get it), never sent to a
    client. `generation`: session cookies issued under an earlier generation end (logout,
    a new password, "log out everywhere"); `token_id`: that bearer token was revoked;
    `everything`: the person was deleted; `project_id`: they left that project (removed
    by an owner, or it was deleted), so their sockets on its chats close."""

    generation: int | None = None
    token_id: int | None = None
    everything: bool = False
    project_id: int | None = None
    kind: Literal["accessEnded"] = "accessEnded"


# The events of one run (they carry its `run_id`), and the rest.
RunEvent = (
    TextDelta
    | HostTurn
    | Timeline
    | AgentToken
    | ToolCallCard
    | RowPersisted
    | Done
    | RunError
    | Status
    | Keepalive
)

Event = (
    TextDelta
    | HostTurn
    | Timeline
    | AgentToken
    | ToolCallCard
    | RowPersisted
    | Done
    | RunError
    | Status
    | Keepalive
    | ConversationChanged
    | BranchChanged
    | ConversationDeleted
    | QueueChanged
    | AccessEnded
)

_CAMEL = {"run_id": "runId", "tool_use_id": "toolUseId", "conversation_id": "conversationId"}


def to_wire(event: Event) -> dict[str, Any]:
    """The JSON frame: `type` plus camelCase fields, None fields left out. (On the hot
    path: fields are read directly, not deep-copied as `asdict` would.)"""
    data = {"type": event.kind}
    event_type: type = type(event)
    for key, wire_key in _wire_keys(event_type):
        value = getattr(event, key)
        if value is not None:
            data[wire_key] = value
    return data


# Built once: `json.dumps` with options builds an encoder per call (per token, as much as
# the rest of the frame).
_SPACED_JSON = json.JSONEncoder(ensure_ascii=False)
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def wire_text(event: Event, *, compact: bool = False) -> str:
    """The JSON frame as text (UTF-8 as is; `compact` without spaces)."""
    return (_COMPACT_JSON if compact else _SPACED_JSON).encode(to_wire(event))


@cache
def _wire_keys(event_type: type[Any]) -> tuple[tuple[str, str], ...]:
    return tuple(
        (f.name, _CAMEL.get(f.name, f.name)) for f in fields(event_type) if f.name != "kind"
    )


_EVENT_TYPES: dict[str, type] = {
    cls.__dataclass_fields__["kind"].default: cls for cls in get_args(Event)
}
_SNAKE = {camel: snake for snake, camel in _CAMEL.items()}


def from_wire(data: dict[str, Any]) -> Event:
    """The event back from its JSON frame (the Redis hub carries events between processes
    in this form). Raises KeyError or TypeError on a frame that is not an event."""
    cls = _EVENT_TYPES[data["type"]]
    return cls(**{_SNAKE.get(key, key): value for key, value in data.items() if key != "type"})


def coalesce(events: list[Event]) -> list[Event]:
    """Neighbouring text deltas (and agent tokens) of one run become one event. (Each run
    of them is joined once: a burst of k deltas costs k, not k squared.)"""
    if len(events) < 2:
        return list(events)  # most batches: one event
    merged: list[Event] = []
    pieces: list[str] = []  # the texts of the run of mergeable events ending merged[-1]
    for event in events:
        previous = merged[-1] if merged else None
        if isinstance(event, TextDelta | AgentToken) and _merges(previous, event):
            pieces.append(event.text)
            continue
        _join_last(merged, pieces)
        merged.append(event)
        pieces = [event.text] if isinstance(event, TextDelta | AgentToken) else []
    _join_last(merged, pieces)
    return merged


def _merges(previous: Event | None, event: Event) -> bool:
    if isinstance(event, TextDelta) and isinstance(previous, TextDelta):
        return previous.run_id == event.run_id
    if isinstance(event, AgentToken) and isinstance(previous, AgentToken):
        return (previous.run_id, previous.agent) == (event.run_id, event.agent)
    return False


def _join_last(merged: list[Event], pieces: list[str]) -> None:
    """merged[-1] with the texts of the events merged into it, when there were any."""
    if len(pieces) < 2:
        return
    last = merged[-1]
    if isinstance(last, TextDelta):
        merged[-1] = TextDelta(last.run_id, "".join(pieces))
    elif isinstance(last, AgentToken):
        merged[-1] = AgentToken(last.run_id, last.agent, "".join(pieces))


def coalesce_per_conversation(batch: list[tuple[int, Event]]) -> list[tuple[int, Event]]:
    """(conversation id, event) pairs grouped per conversation, each in order, with
    neighbouring text deltas (and agent tokens) of one run as one."""
    by_conversation: dict[int, list[Event]] = {}
    for conversation_id, event in batch:
        by_conversation.setdefault(conversation_id, []).append(event)
    return [
        (conversation_id, event)
        for conversation_id, events in by_conversation.items()
        for event in coalesce(events)
    ]
