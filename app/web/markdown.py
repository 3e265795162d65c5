"""Model text as safe HTML.

Everything a model writes is untrusted: a prompt-injected page the model read can make it
emit any text at all. `render_markdown` therefore renders in two layers:

1. markdown-it-py (the commonmark preset plus tables and strikethrough) with raw HTML OFF,
   so `<script>` and friends in the source come out as escaped, visible text, and with
   linkify off. markdown-it's own link validation already refuses `javascript:`,
   `vbscript:`, `file:` and most `data:` URLs.
2. nh3 (ammonia) with a strict allow-list: a few formatting tags, `href`/`title` on links
   only, `http`/`https`/`mailto` URLs only, and every link gets
   `rel="noopener noreferrer"` and `target="_blank"`. No `on*`, `style`, `id`, `hx-*` or
   `data-*` attribute can survive; `class` survives only as `language-xyz` on `<code>`
   and `start` only as digits on `<ol>`. A relative link survives only as the path of one
   of the workspace's own list pages (`/workspace/offers`, `/settings`: IN_APP_PAGES),
   which a GET only shows; any other relative or protocol-relative address is dropped
   (model text has no meaningful base URL, and a link into the app must not act).

Templates must still wrap rendered model content in an element carrying `hx-disable`, so
that htmx ignores anything inside it even if a future change let an `hx-*` attribute
through: this module is one layer, not the only one.

Markdown images are never rendered as `<img>` (that would let model text make the
reader's browser fetch arbitrary URLs): an image becomes a plain link labelled with its
alt text, or just its alt text when it is already inside a link.

Headings are demoted by two levels (`#` renders as `<h3>`), so a reply cannot outshout the
page's own headings.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any, cast

import nh3
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup, escape

from app.web.offload import off_the_loop

MAX_INPUT_CHARS = 200_000
TRUNCATION_MARKER = "[truncated]"
HEADING_DEMOTION = 2

ALLOWED_TAGS = frozenset(
    {
        "p",
        "br",
        "strong",
        "em",
        "del",
        "code",
        "pre",
        "blockquote",
        "ul",
        "ol",
        "li",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "a",
        "hr",
    }
)
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"}}
ALLOWED_URL_SCHEMES = frozenset({"http", "https", "mailto"})
_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,40}")
_DIGITS = re.compile(r"[0-9]{1,9}")
_HAS_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# Pages a reply may point the person to (the demo's "add one on your Offers page"): read
# pages only, whole paths, no query or fragment.
IN_APP_PAGES = re.compile(
    r"/workspace(/(offers|personas|outputs|assets|offers/new|personas/new))?"
    r"|/settings|/search|/chats/new"
)


def _filter_attribute(tag: str, attribute: str, value: str) -> str | None:
    """Second gate after the allow-list (which already dropped every other attribute):
    constrain the values of `class` on `<code>`, `start` on `<ol>` and a relative `href`."""
    if tag == "code" and attribute == "class":
        return value if _LANGUAGE_CLASS.fullmatch(value) else None
    if tag == "ol" and attribute == "start":
        return value if _DIGITS.fullmatch(value) else None
    if tag == "a" and attribute == "href" and not _HAS_SCHEME.match(value):
        return value if IN_APP_PAGES.fullmatch(value) else None
    return value


_CLEANER = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    clean_content_tags={"script", "style"},
    # "*": nothing, or ammonia's default generic attributes (`lang`, `title`) stay allowed.
    attributes={"*": set()} | {tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
    attribute_filter=_filter_attribute,
    strip_comments=True,
    link_rel="noopener noreferrer",
    generic_attribute_prefixes=set(),
    set_tag_attribute_values={"a": {"target": "_blank"}},
    url_schemes=set(ALLOWED_URL_SCHEMES),
    url_relative="pass_through",  # _filter_attribute keeps IN_APP_PAGES only
)


def _demote_headings(state: StateCore) -> None:
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            level = min(int(token.tag[1]) + HEADING_DEMOTION, 6)
            token.tag = f"h{level}"


def _strikethrough_as_del(state: StateCore) -> None:
    """markdown-it writes `~~x~~` as `<s>`; the allow-list has `<del>`."""
    for block in state.tokens:
        for token in block.children or ():
            if token.type in ("s_open", "s_close"):
                token.tag = "del"


def _image_to_link(
    image: Token, inside_link: bool, md: MarkdownIt, env: MutableMapping[str, Any]
) -> list[Token]:
    renderer = cast(RendererHTML, md.renderer)  # the commonmark preset's renderer
    alt = renderer.renderInlineAsText(image.children or [], md.options, env)
    label = Token("text", "", 0, content=alt or "image")
    if inside_link:
        return [label]
    attrs: dict[str, str | int | float] = {"href": str(image.attrGet("src") or "")}
    title = image.attrGet("title")
    if title:
        attrs["title"] = str(title)
    return [
        Token("link_open", "a", 1, attrs=attrs, markup="image"),
        label,
        Token("link_close", "a", -1, markup="image"),
    ]


def _replace_images(state: StateCore) -> None:
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        link_depth = 0
        for token in block.children:
            if token.type == "link_open":
                link_depth += 1
            elif token.type == "link_close":
                link_depth = max(link_depth - 1, 0)
            if token.type == "image":
                children.extend(_image_to_link(token, link_depth > 0, state.md, state.env))
            else:
                children.append(token)
        block.children = children


def _build_markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.core.ruler.push("loopdesk_demote_headings", _demote_headings)
    md.core.ruler.push("loopdesk_images_as_links", _replace_images)
    md.core.ruler.push("loopdesk_strikethrough_as_del", _strikethrough_as_del)
    return md


MARKDOWN = _build_markdown()


def _limit(text: str | None) -> str:
    text = "" if text is None else str(text)
    if len(text) > MAX_INPUT_CHARS:
        text = f"{text[:MAX_INPUT_CHARS]}\n\n{TRUNCATION_MARKER}"
    return text


def sanitize_html(html: str) -> str:
    """Apply the allow-list alone (the second layer of `render_markdown`)."""
    return _CLEANER.clean(html)


def render_markdown(text: str | None) -> Markup:
    """Render model text (Markdown) as sanitized HTML, safe to insert into a page.

    Wrap the result in an element with the `hx-disable` attribute (the chat templates
    do): htmx must never act on anything inside model content. Text longer than
    `MAX_INPUT_CHARS` is cut and ends with a visible "[truncated]" marker.
    """
    html = MARKDOWN.render(_limit(text))
    return Markup(sanitize_html(html))


def render_plain(text: str | None) -> Markup:
    """Escape plain text (a user's message) for HTML, keeping its line breaks as `<br>`."""
    escaped = str(escape(_limit(text)))
    escaped = escaped.replace("\r\n", "\n").replace("\r", "\n")
    return Markup(escaped.replace("\n", "<br>"))


# -- chat messages: code blocks with a language label and a copy button --------------------

# What the allow-list lets through for a code block, exactly as nh3 serializes it: `<pre>`
# only ever comes from a fenced or indented code block (raw HTML is off, so a `<pre>` the
# model writes is escaped text), and the class can only be `language-` plus safe characters.
_CODE_BLOCK_OPEN = re.compile(r'<pre><code(?: class="language-([A-Za-z0-9_+#.-]{1,40})")?>')
_CODE_BLOCK_CLOSE = "</code></pre>"
# A code block scrolls sideways when its lines are long: focusable, so a keyboard can.
_FOCUSABLE_PRE = '<pre tabindex="0">'


def _code_block_head(match: re.Match) -> str:
    language = match[1]
    label = f'<span class="code-lang">{escape(language)}</span>' if language else ""
    name = f"Copy {escape(language)} code" if language else "Copy code"
    return (
        '<div class="code-block"><div class="code-head">'
        f'{label}<button type="button" class="copy-button" data-copy="code" aria-label="{name}">'
        f"Copy</button></div>{match[0].replace('<pre>', _FOCUSABLE_PRE, 1)}"
    )


def decorate_code_blocks(html: str) -> str:
    """Wrap every code block of sanitized HTML in a frame with its language label and a
    copy button (static/app.js copies the block's text). This runs after the sanitizer, on
    its output, and adds only this fixed markup; any surprise leaves the HTML unchanged."""
    if "<pre>" not in html:
        return html
    opened = len(_CODE_BLOCK_OPEN.findall(html))
    if opened != html.count("<pre>") or opened != html.count(_CODE_BLOCK_CLOSE):
        return html
    html = _CODE_BLOCK_OPEN.sub(_code_block_head, html)
    return html.replace(_CODE_BLOCK_CLOSE, _CODE_BLOCK_CLOSE + "</div>")


# A message longer than this is rendered in a thread off `make run`'s serving loop: a long
# report's tables take markdown-it and the sanitizer past 100 ms on a slow machine.
OFF_THE_LOOP_CHARS = 8_000


def render_message(text: str | None) -> Markup:
    """A model's message in the chat: `render_markdown`, then `decorate_code_blocks`. The
    same for a persisted row and for the live segment while it streams."""
    if text and len(text) > OFF_THE_LOOP_CHARS:
        return off_the_loop(_rendered_message, text)
    return _rendered_message(text)


def _rendered_message(text: str | None) -> Markup:
    return Markup(decorate_code_blocks(str(render_markdown(text))))
