"""Unit tests of app.web.markdown: model text rendered as Markdown, then sanitized.

The XSS checks parse the output the way a browser would see it (tags and attributes), not
only as a string: with raw HTML off, a payload such as `<img src=x onerror=alert(1)>`
legitimately shows up as *visible, escaped text*, so `onerror=` or `javascript:` in the
text is fine; what must never appear is a tag, an attribute or a URL that does it.
"""

from __future__ import annotations

import time

import pytest
from jinja2 import Environment
from markupsafe import Markup

from app.web.markdown import (
    MAX_INPUT_CHARS,
    TRUNCATION_MARKER,
    render_markdown,
    render_plain,
    sanitize_html,
)
from tests.web.markup_checks import assert_inert, parse, visible_text
from tests.xss_payloads import XSS_PAYLOADS


def links(html: str) -> list[dict[str, str | None]]:
    return [dict(attrs) for tag, attrs in parse(html).elements if tag == "a"]


# --- XSS ---------------------------------------------------------------------------------


def test_there_are_plenty_of_payloads():
    assert len(XSS_PAYLOADS) >= 25
    assert len(set(XSS_PAYLOADS)) == len(XSS_PAYLOADS)


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_payload_renders_inert(payload):
    html = render_markdown(payload)
    assert isinstance(html, Markup)
    assert_inert(html)


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_payload_renders_inert_inside_markdown_structures(payload):
    """The same payloads inside a list, a quote and a table cell, and after some text."""
    one_line = payload.replace("\n", " ")
    text = f"Intro **bold**\n\n- {one_line}\n\n> {one_line}\n\n| h |\n|---|\n| {one_line} |\n"
    assert_inert(render_markdown(text))


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_payload_in_plain_rendering_is_only_text(payload):
    html = render_plain(payload)
    assert {tag for tag, _ in parse(html).elements} <= {"br"}
    assert visible_text(html) == payload.replace("\n", "")


RAW_HTML_PAYLOADS = [p for p in XSS_PAYLOADS if p.startswith("<") and "\n" not in p]


@pytest.mark.parametrize("payload", RAW_HTML_PAYLOADS)
def test_raw_html_is_shown_as_text_not_swallowed(payload):
    """html=False: raw HTML is neither run nor silently dropped; the reader sees it."""
    html = render_markdown(payload)
    assert visible_text(html).strip() == payload


@pytest.mark.parametrize(
    "payload",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](vbscript:msgbox(1))",
        "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "![x](javascript:alert(1))",
    ],
)
def test_dangerous_markdown_links_are_left_as_visible_text(payload):
    html = render_markdown(payload)
    assert links(html) == []
    assert visible_text(html).strip() == payload


def test_code_span_with_a_tag_is_escaped_and_visible():
    html = render_markdown("`<script>` in code")
    assert "<code>&lt;script&gt;</code>" in html
    assert visible_text(html).strip() == "<script> in code"


def test_code_block_with_a_script_is_escaped_and_visible():
    html = render_markdown("```html\n<script>alert(1)</script>\n```")
    assert '<code class="language-html">&lt;script&gt;alert(1)&lt;/script&gt;' in html
    assert "<script" not in html


def test_fence_info_cannot_inject_attributes_or_classes():
    html = render_markdown('```x"><script>alert(1)</script>\ncode\n```\n\n```js hx-get=/x\nb\n```')
    assert_inert(html)
    assert 'class="language-js"' in html
    assert "hx-get" not in html


def test_link_title_cannot_break_out_of_its_attribute():
    html = render_markdown('[x](https://ok.example "title\\" onmouseover=\\"alert(1)")')
    (link,) = links(html)
    assert link["href"] == "https://ok.example"
    assert link["title"] == 'title" onmouseover="alert(1)'
    assert set(link) == {"href", "title", "rel", "target"}


def test_relative_and_protocol_relative_links_lose_their_href():
    addresses = ("/admin/users", "//evil.example/x", "#top", "x.html", "/\\evil.example")
    addresses += ("/workspace/offers?next=//evil", "/workspace/../admin", "/settings/tokens")
    for text in (f"[x]({address})" for address in addresses):
        html = render_markdown(text)
        assert [link.get("href") for link in links(html)] == [None], text
        assert visible_text(html).strip() == "x"


def test_a_reply_can_link_the_workspace_s_own_pages():
    """The demo says "Add one on your Offers page": the link opens the page, and only the
    list pages of IN_APP_PAGES are linkable (a GET that only shows)."""
    html = render_markdown("Add one on your [Offers page](/workspace/offers) or [here](/settings).")
    assert [link["href"] for link in links(html)] == ["/workspace/offers", "/settings"]


# --- the sanitizer layer on its own (defence in depth behind html=False) --------------------


@pytest.mark.parametrize("payload", XSS_PAYLOADS)
def test_sanitizer_alone_makes_raw_payloads_inert(payload):
    assert_inert(sanitize_html(payload))


def test_sanitizer_strips_everything_outside_the_allow_list():
    html = sanitize_html(
        '<a href="javascript:alert(1)" onclick="x()" hx-get="/x" data-hx-post="/y" id="i" '
        'class="c" style="color:red" target="_self" rel="opener">a</a>'
        '<a href="https://ok.example" target="_top">b</a>'
        '<code class="language-py hx-on">c</code><code class="language-py">d</code>'
        '<ol start="3" reversed>e</ol><ol start="1;x">f</ol>'
        "<script>alert(1)</script><style>p{}</style><img src=x>"
        '<p style="x" id="y" class="z" title="t" lang="en">g</p>'
    )
    assert html == (
        '<a target="_blank" rel="noopener noreferrer">a</a>'
        '<a href="https://ok.example" target="_blank" rel="noopener noreferrer">b</a>'
        '<code>c</code><code class="language-py">d</code>'
        '<ol start="3">e</ol><ol>f</ol>'
        "<p>g</p>"
    )


# --- ordinary rendering -------------------------------------------------------------------


def test_returns_markup_and_is_not_escaped_again_by_jinja():
    env = Environment(autoescape=True)
    env.filters["markdown"] = render_markdown
    out = env.from_string("<div hx-disable>{{ text | markdown }}</div>").render(text="*hi* <b>")
    assert out == "<div hx-disable><p><em>hi</em> &lt;b&gt;</p>\n</div>"


def test_emphasis_strong_strikethrough_and_inline_code():
    html = render_markdown("*a* _b_ **c** __d__ ~~e~~ `f`")
    assert html == (
        "<p><em>a</em> <em>b</em> <strong>c</strong> <strong>d</strong> "
        "<del>e</del> <code>f</code></p>\n"
    )


def test_lists():
    html = render_markdown("- one\n- two\n  - nested\n\n1. first\n2. second\n\nThen:\n\n3. third")
    assert "<ul>\n<li>one</li>\n<li>two\n<ul>\n<li>nested</li>\n</ul>\n</li>\n</ul>" in html
    assert "<ol>\n<li>first</li>\n<li>second</li>\n</ol>" in html
    assert '<ol start="3">\n<li>third</li>\n</ol>' in html


def test_code_blocks():
    html = render_markdown("```python\nif a < b:\n    pass\n```\n\n    indented\n")
    assert '<pre><code class="language-python">if a &lt; b:\n    pass\n</code></pre>' in html
    assert "<pre><code>indented\n</code></pre>" in html


def test_tables_render_without_style_attributes():
    html = render_markdown("| Name | Price |\n|:-----|------:|\n| Tea | 3 |\n| *Cake* | 4 |")
    assert "<table>" in html and "<thead>" in html and "<tbody>" in html
    assert "<th>Name</th>" in html and "<th>Price</th>" in html
    assert "<td><em>Cake</em></td>" in html
    assert "style" not in html


def test_links_get_rel_and_target():
    html = render_markdown(
        '[site](https://example.com/a?b=1&c=2 "Title") [mail](mailto:hi@example.com) '
        "<https://auto.example/x>"
    )
    assert links(html) == [
        {
            "href": "https://example.com/a?b=1&c=2",
            "title": "Title",
            "target": "_blank",
            "rel": "noopener noreferrer",
        },
        {"href": "mailto:hi@example.com", "target": "_blank", "rel": "noopener noreferrer"},
        {"href": "https://auto.example/x", "target": "_blank", "rel": "noopener noreferrer"},
    ]
    assert_inert(html)


def test_bare_urls_are_not_linkified():
    html = render_markdown("see https://example.com and www.example.com")
    assert links(html) == []


def test_headings_are_demoted():
    html = render_markdown("# One\n\n## Two\n\n### Three\n\n###### Six")
    assert html == "<h3>One</h3>\n<h4>Two</h4>\n<h5>Three</h5>\n<h6>Six</h6>\n"


def test_blockquote_and_rule():
    html = render_markdown("> quoted\n\n---\n\nafter")
    assert html == "<blockquote>\n<p>quoted</p>\n</blockquote>\n<hr>\n<p>after</p>\n"


def test_images_become_links_never_img():
    html = render_markdown(
        '![A cat](https://img.example/cat.png "Cat") '
        "[![inner](https://img.example/i.png)](https://example.com) "
        "![](https://img.example/noalt.png)"
    )
    assert "<img" not in html
    assert links(html) == [
        {
            "href": "https://img.example/cat.png",
            "title": "Cat",
            "target": "_blank",
            "rel": "noopener noreferrer",
        },
        {"href": "https://example.com", "target": "_blank", "rel": "noopener noreferrer"},
        {"href": "https://img.example/noalt.png", "target": "_blank", "rel": "noopener noreferrer"},
    ]
    assert visible_text(html).strip() == "A cat inner image"


def test_html_entities_and_special_characters_are_escaped_once():
    html = render_markdown("Fish & chips < 5 > 3 \"quoted\" 'single' &amp; &copy;")
    assert visible_text(html).strip() == "Fish & chips < 5 > 3 \"quoted\" 'single' & ©"
    assert "<" not in html.removeprefix("<p>").removesuffix("</p>\n")


def test_markup_input_is_not_trusted():
    assert "<script" not in render_markdown(Markup("<script>alert(1)</script>"))


def test_empty_and_none():
    assert render_markdown("") == Markup("")
    assert render_markdown(None) == Markup("")
    assert render_plain(None) == Markup("")


# --- size limit ---------------------------------------------------------------------------


def test_long_text_is_truncated_with_a_visible_marker():
    html = render_markdown("a" * MAX_INPUT_CHARS + "TAIL")
    assert "TAIL" not in html
    assert html.endswith(f"<p>{TRUNCATION_MARKER}</p>\n")


def test_text_at_the_limit_is_not_truncated():
    html = render_markdown("a" * (MAX_INPUT_CHARS - 4) + "TAIL")
    assert "TAIL" in html
    assert TRUNCATION_MARKER not in html


def test_truncation_inside_a_code_fence_still_shows_the_marker():
    html = render_markdown("```\n" + "x\n" * MAX_INPUT_CHARS)
    assert visible_text(html).rstrip().endswith(TRUNCATION_MARKER)


def test_pathological_input_at_the_limit_renders_in_reasonable_time():
    """A few seconds at most: the slowest input found; the bound is generous for loaded CI."""
    started = time.perf_counter()
    html = render_markdown("![" * MAX_INPUT_CHARS)
    assert time.perf_counter() - started < 30
    assert visible_text(html).rstrip().endswith(TRUNCATION_MARKER)


# --- plain text ---------------------------------------------------------------------------


def test_render_plain_escapes_and_keeps_line_breaks():
    html = render_plain('Hi <b>there</b> & "you"\nline two\r\nline three\rfour\n\n*not md*')
    assert isinstance(html, Markup)
    assert html == (
        "Hi &lt;b&gt;there&lt;/b&gt; &amp; &#34;you&#34;<br>line two<br>line three<br>four"
        "<br><br>*not md*"
    )


def test_render_plain_truncates_too():
    html = render_plain("b" * MAX_INPUT_CHARS + "TAIL")
    assert "TAIL" not in html
    assert html.endswith(f"<br><br>{TRUNCATION_MARKER}")
