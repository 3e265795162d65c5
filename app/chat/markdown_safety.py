"""Text written by a model or a person, made safe to place inside the Markdown export.

The export's own headings (`#` the chat, `##` each turn, `###` an agent's output) must be
the only headings at those levels, so a reply cannot forge a "## You" turn. Raw HTML
and links that a viewer would run (`javascript:`, `data:`, ... anything but http, https,
mailto or a relative address) must not pass through. Ordinary Markdown (emphasis, lists,
code, safe links) is kept.

`markdown_block` tidies a text (headings demoted by three levels, HTML escaped, unsafe
links reduced to their text) and then proves the result is contained by parsing it with
markdown-it; what cannot be proven safe is fenced whole instead, where nothing is read as
Markdown. `markdown_inline` is for one-line places (titles, file names, labels).
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.token import Token

SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
EXPORT_LEVELS = frozenset({"h1", "h2", "h3"})
_PROBE = "loopdesk-end-of-text"

# Every link is reported as a link (markdown-it would quietly leave out the ones it finds
# unsafe, but another viewer might not): the check below decides.
_parser = MarkdownIt("commonmark")
_parser.validateLink = lambda url: True  # type: ignore[method-assign]  # markdown-it's hook
# Tidying needs only where the blocks are: no inline parse (half the time).
_blocks = MarkdownIt("commonmark").disable("inline")
# Without these, a text can make no heading, HTML, link, fence or setext underline.
_MAYBE_MARKUP = re.compile(r"[#<\[`~]|^[ \t>]*(?:=+|-+)[ \t]*$", re.MULTILINE)

_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):")
_CONTAINERS = r"^((?:[ \t]*(?:>|[*+\-]|\d{1,9}[.)]))*[ \t]*)"
_ATX_OPENING = re.compile(_CONTAINERS + r"(#{1,6})(?=[ \t]|$)")
_SETEXT_LINE = re.compile(_CONTAINERS + r"(?=[=\-])")
_CODE_SPAN = re.compile(r"(`+)(?:.*?)\1")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
# [text](address "title"), the address allowed one level of parentheses, as in alert(1).
_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(\s*<?((?:[^()\s<>]|\([^()\s]*\))*)>?(?:\s[^)\n]*)?\)")
_REFERENCE = re.compile(r"^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*<?([^\s>]*)")
_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>!|~&#])")


def is_safe_url(url: str) -> bool:
    """http, https, mailto, or an address without a scheme (relative)."""
    plain = re.sub(r"[\x00-\x20\x7f]+", "", html.unescape(unquote(url))).lower()
    match = _SCHEME.match(plain)
    return match is None or match.group(1) in SAFE_SCHEMES


def markdown_inline(text: object) -> str:
    """One line of plain text: newlines folded, every character Markdown reads escaped."""
    flat = " ".join(str(text).split())
    return _INLINE_SPECIAL.sub(r"\\\1", flat)


def markdown_block(text: str) -> str:
    """Markdown that keeps its emphasis, lists and code but has no heading at the
    export's levels, no raw HTML and no unsafe link; fenced whole when not provably so."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    if not _MAYBE_MARKUP.search(text):
        return text  # most plain replies: nothing to parse
    tidied = _tidy(text)
    return tidied if _is_contained(tidied) else _fenced(text)


def _tidy(text: str) -> str:
    lines = text.split("\n")
    inert: set[int] = set()
    for token in _blocks.parse(text):
        if token.map is None:
            continue
        start, end = token.map
        if token.type in ("fence", "code_block"):
            inert.update(range(start, end))
        elif token.type == "heading_open":
            _demote(lines, token.markup, start, end)
    return "\n".join(
        line if number in inert else _tidy_line(line) for number, line in enumerate(lines)
    )


def _demote(lines: list[str], markup: str, start: int, end: int) -> None:
    """`## You` becomes `##### You`; a setext heading's underline is escaped."""
    if markup.startswith("#"):
        level = min(len(markup) + 3, 6)
        lines[start] = _ATX_OPENING.sub(lambda m: m.group(1) + "#" * level, lines[start], 1)
    else:
        lines[end - 1] = _SETEXT_LINE.sub(r"\1\\", lines[end - 1], 1)


def _tidy_line(line: str) -> str:
    reference = _REFERENCE.match(line)
    if reference and not is_safe_url(reference.group(1)):
        return ""
    pieces, last = [], 0
    for span in _CODE_SPAN.finditer(line):  # code spans are shown as written
        pieces.extend([_tidy_text(line[last : span.start()]), span.group(0)])
        last = span.end()
    pieces.append(_tidy_text(line[last:]))
    return "".join(pieces)


def _tidy_text(text: str) -> str:
    text = _TAG_START.sub("&lt;", text)
    return _LINK.sub(_link_or_its_text, text)


def _link_or_its_text(match: re.Match[str]) -> str:
    return str(match.group(0) if is_safe_url(match.group(3)) else match.group(2))


def _is_contained(block: str) -> bool:
    """Parsed with a heading after it, the block leaves that heading a heading of its own
    (no open fence or HTML swallows it), has no heading at the export's levels, no HTML
    and no link or image to an unsafe address."""
    env: dict[str, Any] = {}
    tokens = _parser.parse(f"{block}\n\n## {_PROBE}", env)
    headings = [
        i for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag in EXPORT_LEVELS
    ]
    if len(headings) != 1 or tokens[headings[0]].level != 0:
        return False
    if tokens[headings[0] + 1].content != _PROBE:
        return False
    for reference in env.get("references", {}).values():
        if not is_safe_url(reference.get("href", "")):
            return False
    return all(_token_is_safe(token) for token in tokens)


def _token_is_safe(token: Token) -> bool:
    if token.type in ("html_block", "html_inline"):
        return False
    for child in token.children or ():
        if child.type == "html_inline":
            return False
        href = child.attrGet("href") if child.type == "link_open" else child.attrGet("src")
        if href is not None and not is_safe_url(str(href)):
            return False
    return True


def _fenced(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+|~+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"
