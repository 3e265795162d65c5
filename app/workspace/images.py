"""Placeholder artwork for assets that have no image yet: the offer's colours, drawn."""

from __future__ import annotations

import io
from functools import lru_cache

from PIL import Image, ImageDraw

FALLBACK_COLOURS = ("#2f6f5e", "#f4d35e", "#fdfcf7")


@lru_cache(maxsize=256)
def placeholder_png(colours: tuple[str, ...], size: int = 256) -> bytes:
    colours = tuple(c for c in colours if len(c) == 7 and c.startswith("#")) or FALLBACK_COLOURS
    image = Image.new("RGB", (size, size), colours[0])
    draw = ImageDraw.Draw(image)
    band = size // max(len(colours), 1)
    for index, colour in enumerate(colours[1:], start=1):
        draw.ellipse(
            (
                size // 4 * index - band // 2,
                size // 3,
                size // 4 * index + band,
                size // 3 + band * 1.5,
            ),
            fill=colour,
        )
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()
