"""Model text as safe HTML (being written)."""

from markupsafe import Markup, escape


def render_markdown(text: str) -> Markup:
    return Markup(f"<p>{escape(text)}</p>")
