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
  block; the row that replaces the segment at the end is rendered whole.) The search for
  the boundary resumes where it stopped (`BoundaryScan`): it reads each line once.
- **A long paragraph** (`PlainLine`): a tail that is one line of a paragraph is rendered
  from the last word begun in its plain start (letters, digits, spaces, plain
  punctuation: text that renders as itself), the start put back in front unrendered. A
  reply written as one long paragraph then costs per render what a short one does, so a
  reply of 20,000 tokens costs per token what one of 300 does (bench/live_text.py). Markup
  in the line (`*`, `` ` ``, `[`, ...) ends the plain start: from there the line is
  rendered whole at each render, as any unfinished block is (the throttle keeps that to
  `RENDER_SHARE` of a core). Past `MAX_INPUT_CHARS` the text shown stops growing, and
  so do the renders.
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


class BoundaryScan:
    """`stable_boundary` resumed where it stopped: each call reads only the lines that
    completed since the last one (and the first characters of the line being written), so
    a render costs the same at the end of a long reply as at its start. `chars_read`
    counts what it looked at."""

    def __init__(self) -> None:
        self.boundary = 0
        self.position = 0  # where the first line not yet complete starts
        self.searched = 0  # how far that line is known to have no line break
        self.fence: tuple[str, int] | None = None
        self.after_blank = False
        self.chars_read = 0

    def advance(self, text: str) -> int:
        """The stable boundary of `text`, which extends the text of the previous call."""
        while (end := text.find("\n", max(self.position, self.searched))) != -1:
            line = text[self.position : end]
            self.chars_read += end - max(self.position, self.searched) + 1
            self._line(line, self.position, complete=True)
            self.position = self.searched = end + 1
        self.chars_read += len(text) - max(self.position, self.searched)
        self.searched = len(text)
        if self.position < len(text):  # the line being written: looked at, not kept
            head = text[self.position : self.position + _DECIDABLE_CHARS]
            if self._starts_block(head, complete=False):
                return self.position
        return self.boundary

    def _starts_block(self, line: str, complete: bool) -> bool:
        """Whether a non-blank `line` begins a block nothing before it can change. (The
        first `_DECIDABLE_CHARS` of a line decide it, so the line being written is only
        looked at that far.)"""
        return (
            self.fence is None
            and self.after_blank
            and not line[0].isspace()
            and (complete or len(line) >= _DECIDABLE_CHARS or line[0] not in "-+*0123456789")
            and not _LIST_MARKER.match(line)
        )

    def _line(self, line: str, position: int, complete: bool) -> None:
        if self.fence is None and not line.strip():
            self.after_blank = True
            return
        if self._starts_block(line, complete):
            self.boundary = position
        self.after_blank = False
        self.fence = _fence_after(self.fence, line)


# Characters that stand for themselves inside a line of a paragraph: markdown-it renders
# them as text and the sanitizer writes them back unchanged, and none opens or closes
# anything (no `*`, `_`, `` ` ``, `[`, `<`, `&`, `\\`, `~`, `|`, `!`).
_PLAIN_RUN = re.compile(r"""(?:[^\W_]|[ ,.;:?()'"/-])*""")


class PlainLine:
    """The tail when it is one line of a paragraph: the rendering of its plain start (up to
    the last word begun in it) is that text itself, so only the rest is rendered. A long
    paragraph of prose then costs a render the size of its last word, not of the whole
    paragraph; the first character that is not plain stops the plain start there."""

    def __init__(self, start: int = 0) -> None:
        self.start = start  # where the tail begins
        self.plain_end = start  # the plain start ends here
        self.anchor = start  # the last word begun in it (the rendering splits there)
        self.chars_read = 0

    def render(self, text: str) -> Markup:
        """`render_message(complete_partial(text[start:]))` for a tail with no line break."""
        start = self.start
        if self.plain_end < len(text):
            before = self.plain_end
            plain = _PLAIN_RUN.match(text, before)  # (always: it may match nothing)
            self.plain_end = plain.end() if plain else before
            self.chars_read += self.plain_end - before
            word = text.rfind(" ", max(start, before - 1), self.plain_end - 1) + 1
            if word > start and _paragraph_at(text, word):
                self.anchor = word
        anchor = self.anchor
        if anchor > start and _paragraph_at(text, start) and _paragraph_at(text, anchor):
            self.chars_read += len(text) - anchor
            rest = str(render_message(complete_partial(text[anchor:])))
            if rest.startswith("<p>"):
                return Markup("<p>" + text[start:anchor] + rest[3:])
        self.chars_read += len(text) - start
        return render_message(complete_partial(text[start:]))


def _paragraph_at(text: str, position: int) -> bool:
    """Whether a line starting at `position` (a letter or digit) starts a paragraph."""
    return text[position].isalnum() and not _LIST_MARKER.match(text, position)


def render_live(text: str) -> Markup:
    """The live text so far, whole (what the two parts add up to)."""
    return render_message(complete_partial(text[:MAX_INPUT_CHARS]))


class LiveText:
    """One socket's view of the live segment: what the client holds (`shown`, and the
    stable prefix `stable` characters long) and when the next render may run."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        cost_clock: Callable[[], float] = time.perf_counter,
    ):
        self.clock = clock
        self.cost_clock = cost_clock  # what a render costs (a test's own clock: nothing)
        self.closed()

    def changed(self) -> None:
        """Text arrived: render it when due."""
        self.pending = True

    def closed(self) -> None:
        """The segment ended (or was replaced whole): the next text starts a new one."""
        self.shown = False
        self.stable = 0
        self.rendered = 0  # how much of the text the client holds rendered
        self.scan = BoundaryScan()
        self.plain = PlainLine()
        self.pending = False
        self.next_render = 0.0

    def due(self) -> float | None:
        """When a pending render falls due (on `clock`), or None when none is pending."""
        return self.next_render if self.pending else None

    def ready(self) -> bool:
        """Whether a render is pending and due (asked before the text is read: reading it
        joins the deltas since the last read)."""
        due = self.due()
        return due is not None and self.clock() >= due

    def parts(self, text: str) -> dict | None:
        """Both parts from scratch, for the whole `#live-text` (chat/_live_text.html); None
        while there is no text."""
        if not text:
            return None
        started = self.cost_clock()
        text = text[:MAX_INPUT_CHARS]
        self.scan = BoundaryScan()
        self.stable = self.scan.advance(text)
        self.plain = PlainLine(self.stable)
        parts = {"done": render_message(text[: self.stable]), "tail": self._tail(text)}
        self._rendered(started, len(text))
        self.shown = True
        return parts

    def update(self, text: str) -> tuple[Markup | None, Markup]:
        """What changed since the client's last render: the blocks that became stable
        (None when none did) and the tail."""
        started = self.cost_clock()
        text = text[:MAX_INPUT_CHARS]
        boundary = self.scan.advance(text)
        added = None
        if boundary > self.stable:
            added = render_message(text[self.stable : boundary])
            self.stable = boundary
            self.plain = PlainLine(boundary)
        tail = self._tail(text)
        self._rendered(started, len(text))
        return added, tail

    def _tail(self, text: str) -> Markup:
        """The tail rendered: as one line of a paragraph when it is one (PlainLine)."""
        if self.scan.position == self.stable < len(text):
            return self.plain.render(text)
        return render_message(complete_partial(text[self.stable :]))

    def frame(self, text: str) -> str:
        """The HTML frame for `text` when a render is due, else "": the whole `#live-text`
        when the client has none yet, else the newly stable blocks appended and the tail
        replaced (static/app.js updates the tail in place)."""
        if not self.ready():
            return ""
        if not self.shown:
            return render_template("chat/_live_text.html", parts=self.parts(text), swap_oob=True)
        if min(len(text), MAX_INPUT_CHARS) == self.rendered:
            # Past MAX_INPUT_CHARS the text shown no longer grows (the segment's text only
            # grows until it closes): a render would send the same tail again.
            self.pending = False
            return ""
        added, tail = self.update(text)
        return render_template("chat/_live_text.html", added=added, tail=tail)

    def _rendered(self, started: float, chars: int) -> None:
        cost = self.cost_clock() - started
        self.rendered = chars
        self.pending = False
        self.next_render = self.clock() + max(RENDER_INTERVAL, cost / RENDER_SHARE)
