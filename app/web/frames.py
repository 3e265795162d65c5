"""Turning hub events into socket frames: JSON objects, or HTML fragments that htmx's
websocket extension swaps out-of-band by id. Each fragment comes from the partial that owns
its id (templates/chat/_*.html), which the page includes too: this module passes data."""

from __future__ import annotations

import json
import time

from flask import render_template

from app import events as ev
from app.chat.runs import ComposerState
from app.kinds import RowKind
from app.stream.live import LiveState
from app.web.live_text import LiveText


class JsonFrames:
    """One JSON object per event (docs/CONTRACT.md)."""

    min_interval = 0.0
    # JSON clients read the run's state from `done` and `conversation` frames themselves.
    sends_composer = False

    def __init__(self, conversation_id: int, snapshot: LiveState):
        self.conversation_id = conversation_id
        self.pending = snapshot.replay()

    def opening(self) -> list[str]:
        return self.render(self.pending)

    def render(self, events: list[ev.Event]) -> list[str]:
        return [ev.wire_text(event) for event in ev.coalesce(events)]

    def due(self) -> float | None:
        return None  # every delta is sent as it comes

    def title(self, conversation: dict) -> str:
        return ev.wire_text(ev.ConversationChanged(conversation))

    def more(self, after: int) -> str:
        """A catch-up was cut at its page size: ask again with `{"after": after}`."""
        return json.dumps({"type": "more", "after": after})

    def flush(self) -> list[str]:
        return []

    def composer(self, state: ComposerState, queued: list[dict] | None = None) -> str:
        return ""  # JSON clients get the `queue` frame itself


class HtmlFrames:
    """HTML fragments; one frame per batch. The live area mirrors the hub's live state so
    structural changes re-render the right element and text is appended cheaply."""

    # At most ~120 DOM updates a second: a token at 60 tokens/s is swapped in as it comes
    # (within a few ms of the model), while a burst still arrives as one frame.
    min_interval = 1 / 120
    # The composer follows the run's state as the database has it (app.chat.runs
    # .composer_state), read by the socket after the events that change it and on every
    # catch-up; never worked out from the events alone, which a page may get late.
    sends_composer = True

    def __init__(
        self,
        conversation_id: int,
        snapshot: LiveState,
        clock=time.monotonic,
        cost_clock=time.perf_counter,
    ):
        self.conversation_id = conversation_id
        self.live = snapshot
        # The live text is sent rendered as Markdown, a few times a second (live_text.py).
        self.live_text = LiveText(clock, cost_clock)

    def opening(self) -> list[str]:
        return [self._live_area()] if self.live.run_id is not None else []

    def render(self, events: list[ev.Event]) -> list[str]:
        parts = []
        for event in ev.coalesce(events):
            waiting = self.live.status is not None
            parts.append(self._event(event))
            if waiting and self.live.status is None and self.live.run_id is not None:
                parts.append(self._status())  # the working indicator goes
        parts.append(self._live_text_frame())
        html = "".join(part for part in parts if part)
        return [html] if html else []

    def due(self) -> float | None:
        """When a throttled render of the live text falls due (time.monotonic), if any."""
        return self.live_text.due()

    def flush(self) -> list[str]:
        """The throttled render of the live text, once due."""
        html = self._live_text_frame()
        return [html] if html else []

    def _live_text_frame(self) -> str:
        if self.live.run_id is None or not self.live_text.ready():
            return ""  # (the text is read only for a render: reading it joins its deltas)
        return self.live_text.frame(self.live.text)

    def _event(self, event: ev.Event) -> str:
        steps_before = len(self.live.steps)
        if self.live.apply(event):  # a new run: its live area whole
            return self._live_area()
        match event:
            case ev.TextDelta():
                self.live_text.changed()  # rendered once due, with what else arrives
                return ""
            case ev.HostTurn():
                self.live_text.closed()
                return _empty_live_text()
            case ev.Timeline():
                return self._timeline(steps_before)
            case ev.AgentToken():
                step = self._open_writing_step(event.agent)
                if step is None:
                    return ""
                return _template(
                    "chat/_agent_tokens.html", live=self.live, step=step, more=event.text
                )
            case ev.Status(state=state):
                html = self._status()
                if state == "retrying":  # the failed attempt's text is discarded
                    self.live_text.closed()
                    html += _empty_live_text()
                return html
            case ev.Done():
                self.live_text.closed()
                return _template("chat/_live.html", live=None, swap_oob=True)
        return self._page_event(event)

    def _page_event(self, event: ev.Event) -> str:
        """What an event changes outside the live area: rows, the banner, the list."""
        match event:
            case ev.RowPersisted(row=row):
                html = self._rows([row], swap="beforeend")
                if row["kind"] in (RowKind.HOST, RowKind.CARD) and event.run_id == self.live.run_id:
                    self.live_text.closed()
                    html += _empty_live_text()
                return html
            case ev.BranchChanged(messages=rows, version=version) if rows is not None:
                # Another branch is shown: the rows are re-rendered in place (app/chat/branches.py).
                return self._rows(rows, swap="innerHTML", branch_version=version)
            case ev.Keepalive():
                return _template("chat/_keepalive.html")
            case ev.RunError(run_id=None, message=message):
                # A run's error is its error row; the banner is for the socket's own.
                return _template("chat/_banner.html", message=message, swap_oob=True)
            case ev.ConversationDeleted(conversation_id=deleted):
                html = _template("chat/_conversation_item.html", item={"id": deleted}, removed=True)
                if deleted == self.conversation_id:
                    html += _template("chat/_chat_deleted.html", deleted=True, swap_oob=True)
                    html += _template("chat/_chat_title.html", title="Deleted chat", swap_oob=True)
                return html
            case ev.ConversationChanged(conversation=conversation):
                return self.title(conversation)
        return ""

    def _rows(self, rows: list[dict], **swap) -> str:
        """Rows appended, or the rows replaced (`swap`, `branch_version`: chat/_rows.html)."""
        return _template("chat/_rows.html", rows=rows, conversation_id=self.conversation_id, **swap)

    def composer(self, state: ComposerState, queued: list[dict] | None = None) -> str:
        """The composer in the run's state, with its version (chat/_composer.html), and
        the queue above it (chat/_queue.html: what it says follows the run's state)."""
        html = _template(
            "chat/_composer.html", conversation_id=self.conversation_id, state=state, swap_oob=True
        )
        if queued is None:
            return html
        return html + _template(
            "chat/_queue.html",
            conversation_id=self.conversation_id,
            state=state,
            queued=queued,
            swap_oob=True,
        )

    def more(self, after: int) -> str:
        """A catch-up was cut at its page size: the page's script asks again from its
        last row when this marker arrives (static/app.js)."""
        return _template("chat/_catch_up_more.html", after=after)

    def title(self, conversation: dict) -> str:
        """A chat's list item and, for the chat shown here, its header (the tab's title
        follows it): a new title, proposed or renamed."""
        html = _template("chat/_conversation_item.html", item=conversation, swap_oob=True)
        if conversation["id"] == self.conversation_id:
            html += _template("chat/_chat_title.html", title=conversation["title"], swap_oob=True)
        return html

    def _timeline(self, steps_before: int) -> str:
        if len(self.live.steps) > steps_before:
            return _template("chat/_timeline_steps.html", live=self.live, step=self.live.steps[-1])
        # A state or detail change: re-render only the steps' headers, so an expanded token
        # viewer stays open.
        return "".join(
            _template("chat/_timeline_step_head.html", live=self.live, step=step, swap_oob=True)
            for step in self.live.steps
        )

    def _open_writing_step(self, agent: str):
        for step in reversed(self.live.steps):
            if step["stage"] == "writing" and step["agent"] == agent:
                return step
        return None

    def _live_area(self) -> str:
        self.live_text.closed()
        parts = self.live_text.parts(self.live.text) if self.live.run_id is not None else None
        return _template("chat/_live.html", live=self.live, live_parts=parts, swap_oob=True)

    def _status(self) -> str:
        return _template("chat/_live_status.html", live=self.live, swap_oob=True)


def _empty_live_text() -> str:
    """The live text cleared: the segment ended, or its text was discarded."""
    return _template("chat/_live_text.html", parts=None, swap_oob=True)


def _template(name: str, **context) -> str:
    return render_template(name, **context)
