"""The live segment rendered as Markdown while it streams (app/web/live_text.py): text cut
anywhere, the stable blocks that are sent once, the throttle, and the HTML frames."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markupsafe import Markup

from app import events as ev
from app.stream.live import LiveState
from app.web.frames import HtmlFrames
from app.web.live_text import (
    RENDER_INTERVAL,
    LiveText,
    complete_partial,
    render_live,
    stable_boundary,
)
from app.web.markdown import MAX_INPUT_CHARS, decorate_code_blocks, render_markdown, render_message
from tests.web.markup_checks import assert_inert, parse
from tests.xss_payloads import XSS_PAYLOADS

ROOT = Path(__file__).resolve().parents[2]

REPLY = """## Launch plan

Here is the plan, **step by step**:

| Step | Owner | When |
|---|:--|--:|
| Draft the ads | Ada | Monday |
| Review | Bo | Tuesday |

1. Write the *hook*
2. Pick the offer

- tight
- list

```python
def hook():
    return "Calm mornings"
```

> A quote to end with.

That is all for now.
"""

DOCUMENTS = [
    REPLY,
    "# Plan\n\n- a\n- b\n\n- c\n\nAfter\n\n1. x\n2. y\n\n3. z\n\n> q\n\n> r\n\n    code\n\n"
    "    more\n\nend",
    "Intro\n\n```python\nx = 1\n\n\ny = 2\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nTail\n\n"
    "- item\n\n  continued\n\n* * *\n\n---\n\nlast",
    "text\n\n2024 was a year\n\n10) ten\n\n+ plus\n\n***\n\n~~~\ncode\n\n~~~\n\ndone",
    "- a\n\n  ```\n  x\n\n  y\n  ```\n- b\n\npara\n\n   ```\n   indented fence\n\n   ```\n\nok",
    (ROOT / "docs" / "CONTRACT.md").read_text(),
]


# Long paragraphs, each on one line: plain prose, then markup that stops the plain start
# (and words that look like list markers or fences mid-line).
LONG_LINES = [
    " ".join(f"{1733400000000000000 + n}" for n in range(120)),
    "Intro para.\n\n"
    + 'Calm mornings, it\'s (quite) "fine" 12. 3) - a/b: c? ' * 12
    + "then **bold** and `code` and _it_ [a link](https://x.example) &amp; ~~gone~~ "
    + "more words after the markup " * 8
    + "\n\nNext: 1. not a list, 10) still prose " * 3,
    "- a list\n- of two\n\nProse after it " * 3 + "\n\n```py\nx = 1\n```\n\nEnd words here " * 4,
]


def tags(html) -> list[str]:
    return [tag for tag, _ in parse(html).elements]


# --- unfinished Markdown -----------------------------------------------------------------


def test_an_open_fence_renders_as_a_code_block_so_far():
    html = render_live("Here it is:\n\n```python\ndef hook():\n    return 1\n")
    assert (
        '<pre tabindex="0"><code class="language-python">def hook():\n    return 1\n</code></pre>'
        in html
    )
    assert '<span class="code-lang">python</span>' in html


def test_a_closing_fence_half_written_is_not_shown_as_code():
    for cut in ("`", "``"):
        html = render_live(f"```python\nx = 1\n{cut}")
        assert '<pre tabindex="0"><code' in html and "`" not in html


def test_an_opening_fence_still_being_written_shows_no_cut_language():
    assert complete_partial("Look:\n```pyth") == "Look:\n```"
    assert "language-" not in render_live("Look:\n```pyth")
    assert "language-python" in render_live("Look:\n```python\n")
    assert complete_partial("Look:\n``") == "Look:\n"


@pytest.mark.parametrize(
    "partial",
    [
        "| Step | Owner |",
        "| Step | Owner |\n",
        "| Step | Owner |\n|",
        "| Step | Owner |\n|---",
        "| Step | Owner |\n|---|:-",
        "Intro line\n| Step | Owner |\n|--",
    ],
)
def test_a_table_header_shows_as_a_table_before_its_delimiter_row_is_complete(partial):
    html = render_live(partial)
    found = tags(html)
    assert found[found.index("table") :][:5] == ["table", "thead", "tr", "th", "th"]
    assert "|" not in re.sub(r"<[^>]+>", "", str(html))


def test_a_table_streamed_cell_by_cell_is_a_table_at_every_step():
    table = "| Step | Owner |\n|---|---|\n| Draft | Ada |\n| Review | Bo |\n"
    start = len("| Step | Owner |")
    for cut in range(start, len(table) + 1):
        html = render_live(table[:cut])
        assert tags(html)[:2] == ["table", "thead"], table[:cut]
    assert render_live(table) == render_message(table)


def test_pipes_in_prose_are_not_made_into_a_table():
    assert "<table>" not in render_live("Pick a|b, or\nc|d")
    assert "<table>" not in render_live("Pick a|b\n| c")
    assert "<table>" not in render_live("| a | b |\n\n")


def test_an_unclosed_bold_or_code_span_on_the_last_line_is_closed():
    assert "<strong>bold te</strong>" in render_live("Here is **bold te")
    assert "<code>foo</code>" in render_live("Use `foo")
    assert render_live("Here is **") == render_message("Here is")
    assert render_live("Use `") == render_message("Use")
    assert "**" in render_live("2 ** 3")  # not an opening: left as it is


def test_complete_markdown_renders_exactly_as_the_row_will():
    for document in DOCUMENTS:
        assert render_live(document) == render_message(document)


# --- security ----------------------------------------------------------------------------


def undecorated(html) -> str:
    """The HTML without the code-block frames `decorate_code_blocks` adds (checked to be
    exactly that markup, the focusable `<pre tabindex="0">` included), so the rest can be held to the sanitizer's allow-list."""
    html = re.sub(
        r'<div class="code-block"><div class="code-head">(?:<span class="code-lang">'
        r'[A-Za-z0-9_+#.-]{1,40}</span>)?<button type="button" class="copy-button" '
        r'data-copy="code" aria-label="Copy (?:[A-Za-z0-9_+#.-]{1,40} )?code">Copy</button>'
        r'</div><pre tabindex="0">',
        "<pre>",
        str(html),
    )
    html = html.replace("</code></pre></div>", "</code></pre>")
    assert "code-block" not in html and "<button" not in html
    return html


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_every_prefix_of_a_payload_stays_inert(payload):
    """A payload cut anywhere (mid-tag, mid-attribute, mid-URL) while it streams, alone and
    after a table and inside an open code fence."""
    for cut in range(len(payload) + 1):
        prefix = payload[:cut]
        for text in (prefix, f"| a |\n|---|\n| {prefix}", f"```\n{prefix}", f"Hi **{prefix}"):
            assert_inert(render_markdown(complete_partial(text)))
            assert_inert(undecorated(render_live(text)))


def test_the_stable_and_live_parts_of_hostile_text_stay_inert():
    text = "\n\n".join(XSS_PAYLOADS)
    live = LiveText(clock=lambda: 0.0)
    for cut in range(0, len(text) + 1, 7):
        added, tail = live.update(text[:cut])
        assert_inert(undecorated(tail))
        if added is not None:
            assert_inert(undecorated(added))


def test_code_block_frames_carry_only_safe_language_names():
    html = decorate_code_blocks(str(render_markdown('```x"><img src=x>\ncode\n```')))
    assert "<img" not in html and 'aria-label="Copy code"' in html
    html = decorate_code_blocks(str(render_markdown("```c++\nint x;\n```")))
    assert '<span class="code-lang">c++</span>' in html
    assert 'aria-label="Copy c++ code"' in html


# --- stable blocks ------------------------------------------------------------------------


@pytest.mark.timeout(600)
@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_stable_prefix_renders_the_same_apart_as_together(document):
    """Whatever follows, the blocks before a stable boundary render as they will in the
    whole text: the client can keep them while only the tail changes."""
    whole = str(render_message(document))
    # Every cut of a short document; about 2,000 of a long one (each cut renders it whole,
    # so the contract's growth must not make this quadratic in its length).
    step = 1 if len(document) < 2_000 else max(3, len(document) // 2_000)
    cuts = range(0, len(document) + 1, step)
    previous = 0
    checked = set()
    for cut in cuts:
        boundary = stable_boundary(document[:cut])
        assert boundary >= previous  # it only grows
        assert stable_boundary(document[:cut], previous) == boundary  # incremental scan
        previous = boundary
        if boundary in checked:
            continue  # the halves depend on the boundary alone
        checked.add(boundary)
        apart = str(render_message(document[:boundary])) + str(render_message(document[boundary:]))
        assert apart == whole, (cut, document[max(0, boundary - 40) : boundary + 40])


def test_nothing_is_stable_inside_a_fence_a_list_or_indented_code():
    assert stable_boundary("```\ncode\n\nmore code\n") == 0
    assert stable_boundary("- a\n- b\n\n- c\n") == 0
    assert stable_boundary("    code\n\n    more\n") == 0
    assert stable_boundary("Para\n\n1") == 0  # "1" may be the start of "1. item"
    text = "Para one.\n\nPara two"
    assert stable_boundary(text) == text.index("Para two")


# --- frames and the throttle --------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Client:
    """What the page holds of the live segment, from the frames (as htmx would swap them)."""

    def __init__(self):
        self.done = ""
        self.tail = ""
        self.renders = 0

    def apply(self, frame: str) -> None:
        whole = re.search(
            r'<div id="live-text" class="live-text" hx-swap-oob="true"><div class="md" hx-disable>'
            r'<div id="live-md-done" aria-live="off">(.*?)</div><div id="live-md-tail" '
            r'class="live-md-tail">(.*)</div></div></div>',
            frame,
            re.S,
        )
        if whole:
            self.done, self.tail = whole[1], whole[2]
            self.renders += 1
            return
        added = re.match(
            r'<div hx-swap-oob="beforeend:#live-md-done">(.*?)</div>(?=<div id)', frame, re.S
        )
        if added:
            self.done += added[1]
            frame = frame[added.end() :]
        tail = re.fullmatch(
            r'<div id="live-md-tail" class="live-md-tail" hx-swap-oob="true">(.*)</div>',
            frame,
            re.S,
        )
        if tail:
            self.tail = tail[1]
            self.renders += 1


def stream(frames: HtmlFrames, clock: Clock, client: Client, text: str, pieces: int, gap: float):
    """Deltas `gap` seconds apart, relayed as sockets.py does: each batch rendered, and a
    pending render flushed when it falls due between deltas."""
    size = -(-len(text) // pieces)
    sizes = []
    for start in range(0, len(text), size):
        deadline = clock.now + gap
        while (due := frames.due()) is not None and due <= deadline:
            clock.now = max(clock.now, due)
            for frame in frames.flush():
                sizes.append(len(frame))
                client.apply(frame)
        clock.now = deadline
        for frame in frames.render([ev.TextDelta(7, text[start : start + size])]):
            sizes.append(len(frame))
            client.apply(frame)
    return sizes


@pytest.fixture
def html_frames(app):
    with app.test_request_context():
        clock = Clock()
        snapshot = LiveState()
        snapshot.reset(7)
        # Renders cost nothing on the test's clock: how many renders run then depends on
        # the clock alone, not on how loaded the machine is (RENDER_SHARE is tested apart).
        yield HtmlFrames(1, snapshot, clock=clock, cost_clock=clock), clock


def test_many_deltas_make_a_few_renders_a_second_and_the_last_is_the_final_rendering(
    html_frames,
):
    frames, clock = html_frames
    client = Client()
    text = REPLY * 8  # ~3,700 characters
    seconds = 6.0
    stream(frames, clock, client, text, pieces=600, gap=seconds / 600)

    assert client.renders <= seconds / RENDER_INTERVAL + 2
    assert client.renders >= seconds / RENDER_INTERVAL / 2  # it does keep up
    assert frames.due() is not None  # the last deltas wait for their render
    clock.now = frames.due()
    for frame in frames.flush():
        client.apply(frame)
    assert frames.due() is None and frames.flush() == []
    assert client.done + client.tail == str(render_message(text))


def test_frames_stay_small_as_the_reply_grows(html_frames):
    frames, clock = html_frames
    client = Client()
    paragraphs = "\n\n".join(f"Paragraph {n}: " + "calm mornings " * 12 for n in range(60))
    sizes = stream(frames, clock, client, paragraphs, pieces=900, gap=0.01)
    assert len(paragraphs) > 10_000
    assert max(sizes) < 1_000  # the block being written (and one finished), never the whole


@pytest.mark.parametrize("document", [REPLY, LONG_LINES[1]], ids=["reply", "long-line"])
def test_a_late_joiner_gets_the_same_html_as_a_socket_that_watched_it_all(
    app, html_frames, document
):
    frames, clock = html_frames
    client = Client()
    stream(frames, clock, client, document, pieces=120, gap=0.01)
    clock.now = frames.due() or clock.now
    for frame in frames.flush():
        client.apply(frame)

    snapshot = LiveState()
    snapshot.reset(7)
    snapshot.text = document
    with app.test_request_context():
        (opening,) = HtmlFrames(1, snapshot).opening()
    joined = Client()
    joined.apply(
        re.search(r'<div id="live-text".*?</div></div></div>', opening, re.S)[0].replace(
            'class="live-text">', 'class="live-text" hx-swap-oob="true">', 1
        )
    )
    assert joined.done + joined.tail == client.done + client.tail == str(render_message(document))


def test_a_host_row_or_the_end_of_the_run_drops_a_pending_render(html_frames):
    frames, clock = html_frames
    frames.render([ev.TextDelta(7, "First words")])
    frames.render([ev.TextDelta(7, " and more")])
    assert frames.due() is not None
    row = {"id": 2, "sequence": 2, "role": "assistant", "kind": "host", "content": "Done."}
    (html,) = frames.render([ev.RowPersisted(row, 7)])
    assert 'id="m-2"' in html and frames.due() is None
    # The next segment's first words show at once.
    (html,) = frames.render([ev.TextDelta(7, "Next **segment**")])
    assert "<strong>segment</strong>" in html


def test_the_json_socket_still_sends_every_delta(app):
    from app.web.frames import JsonFrames

    frames = JsonFrames(1, LiveState())
    assert frames.render([ev.TextDelta(7, "a"), ev.TextDelta(8, "b")]) == [
        '{"type": "textDelta", "runId": 7, "text": "a"}',
        '{"type": "textDelta", "runId": 8, "text": "b"}',
    ]
    assert frames.due() is None and frames.flush() == []


def test_a_slow_render_waits_longer():
    import app.web.live_text as live_text

    ticks = iter([0.0, 0.5])  # a render that took half a second
    live = LiveText(clock=lambda: 10.0, cost_clock=lambda: next(ticks))
    live.update("text")
    assert live.next_render == pytest.approx(10.0 + 0.5 / live_text.RENDER_SHARE)


# --- cost per delta: flat in the reply's length (issue 36) --------------------------------


def rendered_from_scratch(text: str) -> str:
    """What a render of `text` whole gives the client: the stable blocks and the tail."""
    boundary = stable_boundary(text)
    return str(render_message(text[:boundary])) + str(
        render_message(complete_partial(text[boundary:]))
    )


@pytest.mark.parametrize("document", [*LONG_LINES, REPLY])
def test_a_reply_rendered_delta_by_delta_shows_what_rendering_it_whole_shows(app, document):
    """Each render reads only what is new, and still gives the same HTML at every cut as
    rendering the text so far from scratch."""
    live = LiveText(clock=lambda: 0.0)
    done = ""
    step = 1 if len(document) < 1_500 else 3
    for cut in range(1, len(document) + 1, step):
        text = document[:cut]
        if not live.shown:
            parts = live.parts(text)
            done, tail = str(parts["done"]), str(parts["tail"])
        else:
            added, tail = live.update(text)
            done += str(added or "")
        assert live.stable == stable_boundary(text)
        assert done + str(tail) == rendered_from_scratch(text), cut


def stamps(count: int) -> list[str]:
    """A stamped model's reply (bench/stamped_model.py): one token a delta."""
    return [f"{1733400000000000000 + n} " for n in range(count)]


def paragraphs(count: int) -> list[str]:
    return ["\n\n" if n % 60 == 59 else f"word{n % 7} " for n in range(count)]


@pytest.mark.parametrize("reply", [stamps, paragraphs])
def test_what_a_render_reads_does_not_grow_with_the_reply(monkeypatch, reply):
    """The characters a render hands the Markdown renderer and the boundary scan reads, per
    delta: the same at the end of a 3,000-token reply as in a 200-token one."""
    import app.web.live_text as live_text

    rendered: list[int] = []

    def measured(text: str) -> Markup:
        rendered.append(len(text))
        return render_message(text)

    monkeypatch.setattr(live_text, "render_message", measured)

    def most_read_per_delta(tokens: int) -> tuple[int, int]:
        live = LiveText(clock=lambda: 0.0)
        text, most_scanned = "", 0
        rendered.clear()
        for token in reply(tokens):
            text += token
            before = live.scan.chars_read + live.plain.chars_read
            live.update(text)
            most_scanned = max(most_scanned, live.scan.chars_read + live.plain.chars_read - before)
        return max(rendered), most_scanned

    short, long = most_read_per_delta(200), most_read_per_delta(3_000)
    assert long == short


def test_past_the_length_rendered_no_render_is_sent(html_frames):
    """A reply longer than the renderer takes (MAX_INPUT_CHARS) shows its start: renders
    stop once it is reached, rather than sending the same tail again."""
    frames, clock = html_frames
    word = "calm mornings " * 1_000
    for _ in range(MAX_INPUT_CHARS // len(word) + 1):
        frames.render([ev.TextDelta(7, word)])
        clock.now = frames.due() or clock.now
        frames.flush()
    frames.render([ev.TextDelta(7, "more")])
    clock.now = frames.due()
    assert frames.flush() == [] and frames.due() is None
