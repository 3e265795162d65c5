"""What the Markdown tests hold rendered HTML to: parsed the way a browser sees it (tags,
attributes, URLs), so a payload left as visible escaped text passes and a live tag fails."""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Written out here rather than imported, so that widening the module's allow-list fails a test.
ALLOWED_TAGS = {
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
ALLOWED_ATTRIBUTES = {"a": {"href", "title", "rel", "target"}, "code": {"class"}, "ol": {"start"}}
ACTIVE_TAGS = (
    "script",
    "iframe",
    "svg",
    "math",
    "object",
    "embed",
    "style",
    "form",
    "input",
    "button",
    "img",
    "base",
    "meta",
    "link",
    "details",
    "body",
    "template",
    "textarea",
    "noscript",
    "div",
)
SAFE_SCHEMES = ("http:", "https:", "mailto:")
DANGEROUS_SCHEMES = ("javascript:", "data:", "vbscript:")


class Collector(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, attrs))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, attrs))

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.elements.append(("!--", [("comment", data)]))


def parse(html: str) -> Collector:
    collector = Collector()
    collector.feed(str(html))
    collector.close()
    return collector


def visible_text(html: str) -> str:
    return "".join(parse(html).text)


def url_prefix(value: str) -> str:
    """What a browser reads as the scheme: it drops ASCII whitespace and controls first."""
    return re.sub(r"[\x00-\x20]", "", value).lower()


def assert_inert(html: str) -> None:
    raw = str(html).lower()
    for tag in ACTIVE_TAGS:
        assert f"<{tag}" not in raw, f"<{tag} in {html!r}"
    for tag, attrs in parse(html).elements:
        assert tag in ALLOWED_TAGS, f"tag {tag!r} in {html!r}"
        for name, value in attrs:
            assert name in ALLOWED_ATTRIBUTES.get(tag, set()), f"{tag}[{name}] in {html!r}"
            assert not re.fullmatch(r"on\w+", name)
            assert not name.startswith(("hx-", "data-"))
            assert name not in {"style", "id", "srcdoc", "formaction", "src", "action"}
            prefix = url_prefix(value or "")
            assert not prefix.startswith(DANGEROUS_SCHEMES), f"{tag}[{name}]={value!r}"
            if name == "href":
                assert prefix.startswith(SAFE_SCHEMES), f"href={value!r}"
            if name == "class":
                assert re.fullmatch(r"language-[A-Za-z0-9_+#.-]+", value or "")
            if name == "start":
                assert (value or "").isdigit()
        if tag == "a":
            attributes = dict(attrs)
            assert attributes.get("rel") == "noopener noreferrer"
            assert attributes.get("target") == "_blank"
