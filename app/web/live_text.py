"""The live segment (the host text streaming now) as rendered Markdown, on the HTML socket.

The text so far goes through the same pipeline as a persisted row (`render_message`:
markdown-it, the nh3 allow-list, code-block frames), so headings, lists, tables and code
look the same while they stream and once the row replaces them. Three things make that
work on text cut anywhere, cheaply:

- **Unfinished Markdown** (`complete_partial`): only the end of the text can be unfinished.
  An open code fence already renders as a code block to the end (CommonMark); a closing
  fence half written is left out rather than shown as code, and so is the info string of
  an opening fence still being written. A table whose delimiter row has not arrived yet
  gets one, so its header shows as a table at once. An unclosed `` ` `` or `**` on the last
  line is closed. Nothing here adds HTML: it only edits Markdown, which the pipeline then
  renders and sanitizes as any other.
- **Stable blocks** (`stable_boundary`): a blank line followed by a line that can neither
  continue the block before it (indented) nor join a list (a list marker) ends everything
  before it for good. That prefix is rendered once and appended on the client
  (`#live-md-done`); only the tail after it (`#live-md-tail`) is re-rendered, so a render
  costs the size of the last block, not of the whole reply, and a frame stays small.
  (A reference-style link definition arriving later can still change an earlier stable
  block; the row that replaces the segment at the end is rendered whole.)
- **Throttle** (`LiveText`): a segment is rendered at most every `RENDER_INTERVAL` seconds
  (and a render may cost at most `RENDER_SHARE` of a core): deltas arriving in between
  are coalesced into the next render. The first delta of a segment renders at once.

Each socket renders from its own copy of the live state (the hub's, or Redis's replayed),
so late joiners and other processes see the same HTML for the same text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from flask import render_template
from markdown_it.rules_block.table import escapedSplit
from markupsafe import Markup

from app.web.markdown import MAX_INPUT_CHARS, render_message

RENDER_INTERVAL = 0.2  # at most five renders a second per stream
RENDER_SHARE = 0.05  # a render that took t seconds waits at least t / RENDER_SHARE

# Fences as the scanner sees them: any indentation (fences inside list items are indented).
_FENCE_OPEN = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*")
_FENCE_RUN = re.compile(r"[ \t]*(`+|~+)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_PIPE_ROW = re.compile(r" {0,3}\|")
_DELIMITER_SO_FAR = re.compile(r" {0,3}\|[-:| \t]*")
_LIST_MARKER = re.compile(r"(?:[-+*]|[0-9]{1,9}[.)])(?:[ \t]|$)")
# A line this long (or complete) shows whether it starts with a list marker.
_DECIDABLE_CHARS = 12


def _fence_after(fence: tuple[str, int] | None, line: str) -> tuple[str, int] | None:
    """The fence open after `line`: (its character, its length), or None."""
    if fence is None:
        opening = _FENCE_OPEN.fullmatch(line)
        if opening and not (opening[1][0] == "`" and "`" in opening[2]):
            return opening[1][0], len(opening[1])
        return None
    closing = _FENCE_CLOSE.fullmatch(line)
    if closing and closing[1][0] == fence[0] and len(closing[1]) >= fence[1]:
        return None
    return fence


def complete_partial(text: str) -> str:
    """Markdown cut mid-stream, with its unfinished end completed or left out (see the
    module's docstring). Complete Markdown comes back unchanged, except that a last line
    with an unclosed `` ` `` or `**` is closed."""
    lines = text.split("\n")
    fence = None
    for line in lines[:-1]:
        fence = _fence_after(fence, line)
    last = lines[-1]
    if fence is not None:
        run = _FENCE_RUN.fullmatch(last)
        if run and run[1][0] == fence[0] and len(run[1]) < fence[1]:
            lines[-1] = ""  # a closing fence half written: not code
        return "\n".join(lines)
    opening = _FENCE_OPEN.fullmatch(last)
    if opening and not (opening[1][0] == "`" and "`" in opening[2]):
        lines[-1] = last[: opening.end(1)]  # the language may still be cut
        return "\n".join(lines)
    run = _FENCE_RUN.fullmatch(last)
    if run and len(run[1]) < 3:
        lines[-1] = ""  # a fence (or a code span) just begun
    else:
        lines[-1] = _close_inline(last)
    return "\n".join(_complete_table(lines))


def _close_inline(line: str) -> str:
    if line.count("`") % 2:
        head, _, tail = line.rpartition("`")
        line = head if not tail.strip() else line + "`"
    if _CODE_SPAN.sub("", line).count("**") % 2:
        head, _, tail = line.rpartition("**")
        if not tail.strip():
            return head
        if not tail[0].isspace():  # it opens: close it
            return line.rstrip() + "**"
    return line


def _complete_table(lines: list[str]) -> list[str]:
    """A table's header row with no (or half a) delimiter row yet gets a whole one."""
    body = lines[:-1] if len(lines) > 1 and lines[-1] == "" else list(lines)

    def plain(index: int) -> bool:  # not a table line: the line before a header
        return index < 0 or "|" not in body[index]

    count = len(body)
    if (
        count >= 2
        and _DELIMITER_SO_FAR.fullmatch(body[-1])
        and _PIPE_ROW.match(body[-2])
        and plain(count - 3)
    ):
        body.pop()
    elif not (count >= 1 and _PIPE_ROW.match(body[-1]) and plain(count - 2)):
        return lines
    cells = escapedSplit(body[-1].strip())
    if cells and cells[0] == "":
        cells.pop(0)
    if cells and cells[-1] == "":
        cells.pop()
    if not cells:
        return lines
    return [*body, "|" + "|".join([" --- "] * len(cells)) + "|"]


def stable_boundary(text: str, start: int = 0) -> int:
    """The end of the longest prefix of `text` (at least `start`, itself such an end) that
    later text can no longer change: rendering the prefix and the rest apart gives the
    same HTML as rendering them together."""
    boundary = start
    fence = None
    after_blank = False
    position = start
    length = len(text)
    while position < length:
        end = text.find("\n", position)
        complete = end != -1
        if not complete:
            end = length
        line = text[position:end]
        if fence is None and not line.strip():
            after_blank = True
        else:
            if (
                fence is None
                and after_blank
                and not line[0].isspace()
                and (complete or len(line) >= _DECIDABLE_CHARS or line[0] not in "-+*0123456789")
                and not _LIST_MARKER.match(line)
            ):
                boundary = position
            after_blank = False
            if complete:
                fence = _fence_after(fence, line)
        position = end + 1
    return boundary


def render_live(text: str) -> Markup:
    """The live text so far, whole (what the two parts add up to)."""
    return render_message(complete_partial(text[:MAX_INPUT_CHARS]))


class LiveText:
    """One socket's view of the live segment: what the client holds (`shown`, and the
    stable prefix `stable` characters long) and when the next render may run."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.shown = False
        self.stable = 0
        self.pending = False
        self.next_render = 0.0

    def changed(self) -> None:
        """Text arrived: render it when due."""
        self.pending = True

    def closed(self) -> None:
        """The segment ended (or was replaced whole): the next text starts a new one."""
        self.shown = False
        self.stable = 0
        self.pending = False
        self.next_render = 0.0

    def due(self) -> float | None:
        """When a pending render falls due (on `clock`), or None when none is pending."""
        return self.next_render if self.pending else None

    def parts(self, text: str) -> dict | None:
        """Both parts from scratch, for the whole `#live-text` (chat/_live_text.html); None
        while there is no text."""
        if not text:
            return None
        started = time.perf_counter()
        text = text[:MAX_INPUT_CHARS]
        self.stable = stable_boundary(text)
        parts = {
            "done": render_message(text[: self.stable]),
            "tail": render_message(complete_partial(text[self.stable :])),
        }
        self._rendered(started)
        self.shown = True
        return parts

    def update(self, text: str) -> tuple[Markup | None, Markup]:
        """What changed since the client's last render: the blocks that became stable
        (None when none did) and the tail."""
        started = time.perf_counter()
        text = text[:MAX_INPUT_CHARS]
        boundary = stable_boundary(text, self.stable)
        added = render_message(text[self.stable : boundary]) if boundary > self.stable else None
        self.stable = boundary
        tail = render_message(complete_partial(text[boundary:]))
        self._rendered(started)
        return added, tail

    def frame(self, text: str) -> str:
        """The HTML frame for `text` when a render is due, else "": the whole `#live-text`
        when the client has none yet, else the newly stable blocks appended and the tail
        replaced (static/app.js updates the tail in place)."""
        due = self.due()
        if due is None or self.clock() < due:
            return ""
        if not self.shown:
            return render_template("chat/_live_text.html", parts=self.parts(text), swap_oob=True)
        added, tail = self.update(text)
        return render_template("chat/_live_text.html", added=added, tail=tail)

    def _rendered(self, started: float) -> None:
        cost = time.perf_counter() - started
        self.pending = False
        self.next_render = self.clock() + max(RENDER_INTERVAL, cost / RENDER_SHARE)
