"""The live part of an active run (current text segment, timeline, agent tokens), kept so
a socket that joins mid-run first sees what the others already saw."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

from app import events as ev
from app.kinds import RowKind

MAX_AGENT_TOKENS_CHARS = 60_000


class LiveEffect(StrEnum):
    """What an event does to its conversation's live state: the one statement of when a run
    starts, resets and keeps a row. LiveState applies it here; the Redis hub's script
    applies it to the list it keeps (the values are the script's argument)."""

    NONE = "pass"  # not part of a run's live state (no run; a list update; a keepalive)
    RUN = "run"  # part of its run's live state; another run's event starts that run anew
    ROW = "row"  # a row: part of the live state only while its run is the live one
    DONE = "done"  # its run ended: the live state goes, if that run is the live one


def live_effect(event: ev.Event) -> LiveEffect:
    """How `event` changes the live state (see LiveEffect)."""
    if isinstance(event, ev.Done):
        return LiveEffect.DONE
    if getattr(event, "run_id", None) is None or isinstance(
        event, ev.ConversationChanged | ev.Keepalive
    ):
        return LiveEffect.NONE
    if isinstance(event, ev.RowPersisted):
        return LiveEffect.ROW  # a row of another run comes from a request, not the live run
    return LiveEffect.RUN


class LiveState:
    """A run's live state. Its text is kept as the pieces that arrived, joined only when
    read: a delta costs the same at the 20,000th token as at the first (a `str +=` on an
    attribute copies the whole text each time), and a late joiner replaying a run's deltas
    from Redis joins them once."""

    def __init__(
        self,
        run_id: int | None = None,
        text: str = "",
        steps: list[dict[str, Any]] | None = None,
        status: ev.WaitState | None = None,
        status_since: int | None = None,
        status_reason: ev.RetryReason | None = None,
    ) -> None:
        self.run_id = run_id
        self._pieces: list[str] = [text] if text else []
        self.steps: list[dict[str, Any]] = steps if steps is not None else []
        # Waiting on the model with nothing shown yet ("thinking", "retrying"), since when
        # (epoch ms): what the working indicator shows.
        self.status = status
        self.status_since = status_since
        self.status_reason = status_reason  # why a call is retried

    @property
    def text(self) -> str:
        """The live segment's text so far."""
        if len(self._pieces) > 1:
            self._pieces = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    @text.setter
    def text(self, value: str) -> None:
        self._pieces = [value] if value else []

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LiveState):
            return NotImplemented
        return self._fields() == other._fields()

    def __repr__(self) -> str:
        return f"LiveState{self._fields()!r}"

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.run_id,
            self.text,
            self.steps,
            self.status,
            self.status_since,
            self.status_reason,
        )

    def apply(self, event: ev.Event) -> bool:
        """Apply `event`; True when it started a new run's live state (its first event)."""
        if (
            type(event) is ev.TextDelta
            and self.run_id is not None
            and event.run_id == self.run_id
            and self.status is None
        ):
            # The live run's next piece of text (nearly every event): the rules below come
            # to just this.
            self._pieces.append(event.text)
            return False
        effect = live_effect(event)
        if effect is LiveEffect.NONE or not isinstance(event, ev.RunEvent):
            return False
        if effect is LiveEffect.DONE:
            if event.run_id == self.run_id:
                self.reset(None)
            return False
        started = event.run_id != self.run_id
        if started:
            if effect is LiveEffect.ROW:
                return False
            self.reset(event.run_id)
        if isinstance(event, ev.Status):
            self._wait(event)
            return started
        if self.status is not None and not _leaves_wait_on(event):
            self.status = self.status_since = self.status_reason = None
        match event:
            case ev.TextDelta(text=text):
                self._pieces.append(text)
            case ev.HostTurn():
                self.text = ""
            case ev.RowPersisted(row=row) if row["kind"] in (RowKind.HOST, RowKind.CARD):
                self.text = ""
            case ev.Timeline():
                self._timeline(event)
            case ev.AgentToken(agent=agent, text=text):
                step = self._open_step("writing", agent)
                if step is not None and len(step["tokens"]) < MAX_AGENT_TOKENS_CHARS:
                    step["tokens"] += text
        return started

    def reset(self, run_id: int | None) -> None:
        self.run_id = run_id
        self.text = ""
        self.steps = []
        self.status = self.status_since = self.status_reason = None

    def _wait(self, event: ev.Status) -> None:
        """A wait keeps the time it began (a retry while still waiting continues it)."""
        if event.state == "retrying":
            self.text = ""  # the failed attempt's text is discarded
        if self.status is None:
            self.status_since = event.since
        self.status = event.state
        self.status_reason = event.reason

    @property
    def status_elapsed(self) -> int:
        """Whole seconds the current wait has lasted."""
        if self.status_since is None:
            return 0
        return max(0, int(time.time() - self.status_since / 1000))

    def _timeline(self, event: ev.Timeline) -> None:
        if event.state == "started":
            last = self.steps[-1] if self.steps else None
            if (
                event.stage in ("resolving_context", "presenting")
                and last is not None
                and last["stage"] == event.stage
            ):
                last["state"] = "started"
                if event.detail and event.detail not in last["details"]:
                    last["details"].append(event.detail)
                return
            self.steps.append(
                {
                    "index": len(self.steps),
                    "stage": event.stage,
                    "agent": event.agent,
                    "state": "started",
                    "details": [event.detail] if event.detail else [],
                    "tokens": "",
                }
            )
            return
        step = self._open_step(event.stage, event.agent)
        if step is not None:
            step["state"] = "done"

    def _open_step(self, stage: str, agent: str | None) -> dict[str, Any] | None:
        for step in reversed(self.steps):
            if step["stage"] == stage and (agent is None or step["agent"] == agent):
                found: dict[str, Any] = step
                return found
        return None

    def copy(self) -> LiveState:
        return LiveState(
            self.run_id,
            self.text,
            [dict(s, details=list(s["details"])) for s in self.steps],
            self.status,
            self.status_since,
            self.status_reason,
        )

    def replay(self) -> list[ev.Event]:
        """The state as events, for clients that only understand events (JSON sockets)."""
        if self.run_id is None:
            return []
        events: list[ev.Event] = []
        for step in self.steps:
            for detail in step["details"] or [None]:
                events.append(
                    ev.Timeline(self.run_id, step["stage"], "started", step["agent"], detail)
                )
            if step["tokens"]:
                events.append(ev.AgentToken(self.run_id, step["agent"], step["tokens"]))
            if step["state"] == "done":
                events.append(ev.Timeline(self.run_id, step["stage"], "done", step["agent"]))
        if self.text:
            events.append(ev.TextDelta(self.run_id, self.text))
        if self.status is not None:
            events.append(
                ev.Status(self.run_id, self.status, self.status_since or 0, self.status_reason)
            )
        return events


def _leaves_wait_on(event: ev.Event) -> bool:
    """Events that do not end a wait: a notice row (e.g. the history was summarized)."""
    return isinstance(event, ev.RowPersisted) and event.row.get("kind") == RowKind.NOTICE
