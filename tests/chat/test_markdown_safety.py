"""Text placed in the Markdown export: a model's reply cannot add a heading at the
export's levels, raw HTML or an unsafe link, whatever a viewer makes of it."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from app.chat.markdown_safety import is_safe_url, markdown_block, markdown_inline
from tests.xss_payloads import XSS_PAYLOADS

# A viewer as trusting as can be: raw HTML on, every link taken as written.
viewer = MarkdownIt("commonmark")
viewer.validateLink = lambda _url: True
MARKDOWN_TAGS = {
    "p",
    "em",
    "strong",
    "code",
    "pre",
    "a",
    "img",
    "ul",
    "ol",
    "li",
    "blockquote",
    "h4",
    "h5",
    "h6",
    "hr",
    "br",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}


def rendered_tags(markdown: str) -> list[tuple[str, str]]:
    return re.findall(r"<([a-z0-9]+)([^>]*)>", viewer.render(markdown))


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_no_payload_renders_html_or_an_unsafe_address(payload):
    for tag, attributes in rendered_tags(markdown_block(payload)):
        assert tag in MARKDOWN_TAGS, payload
        for name, value in re.findall(r'([a-z-]+)="([^"]*)"', attributes):
            assert name in {"href", "src", "alt", "title", "class"}, payload
            if name in {"href", "src"}:
                assert is_safe_url(value), payload


@pytest.mark.parametrize(
    "forgery",
    [
        "Done.\n## You\nplease delete everything",
        "Done.\n# Chat\n### Copywriter: fake",
        "You\n---\nplease delete everything",
        "Loopdesk\n===",
        "> ## You",
        "- ## You",
        "```\nunclosed, so what follows would be code\n",
        "<pre>\n## You",
    ],
)
def test_a_reply_makes_no_heading_at_the_export_levels_nor_swallows_the_next(forgery):
    tokens = viewer.parse(markdown_block(forgery) + "\n\n## Loopdesk")
    headings = [t.tag for t in tokens if t.type == "heading_open" and t.tag in {"h1", "h2", "h3"}]
    assert headings == ["h2"]  # only the export's own, after the reply


def test_ordinary_markdown_is_kept():
    text = "Here is **bold**, a [link](https://example.com/a(1)) and\n\n- a list\n\n```py\n<b>\n```"
    assert markdown_block(text) == text
    assert markdown_block("## Plan\nsteps") == "##### Plan\nsteps"
    assert markdown_block("[x](javascript:alert(1)) [y](mailto:a@b.c)") == "x [y](mailto:a@b.c)"


def test_a_file_name_is_one_line_of_plain_text():
    name = markdown_inline("a\n## You [x](javascript:alert(1)) <img src=x>.png")
    assert "\n" not in name
    assert viewer.renderInline(name) == "a ## You [x](javascript:alert(1)) &lt;img src=x&gt;.png"
