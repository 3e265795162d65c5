"""Image providers behind one interface:

    provider.generate(prompt, width, height, style) -> GeneratedImage

- `OpenAIImagesProvider`: any server speaking OpenAI's `POST /v1/images/generations`
  (`IMAGE_PROVIDER_URL`, `IMAGE_PROVIDER_KEY`, `IMAGE_MODEL`).
- `LocalDraftRenderer`: no network; a real PNG drawn with Pillow from the prompt, the
  preset's style and the brand colours, plainly labelled as a draft render.

`image_provider(settings)` picks the configured one. Failures are `MediaError`, whose
message is for the person; the image tools turn it into a failure the model relays."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import math
import random
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx2 as httpx
from PIL import Image, ImageColor, ImageDraw, ImageFont

from app.config import Settings
from app.workspace.images import FALLBACK_COLOURS

DEFAULT_TIMEOUT_SECONDS = 120.0
MAX_IMAGE_BYTES = 25 * 1024 * 1024
MAX_PROMPT_CHARS = 4000
DRAFT_PROVIDER = "local-draft"


class MediaError(Exception):
    """The provider could not make the image; the message says why, for the person."""


@dataclass(frozen=True)
class ImageStyle:
    """How an image should look besides its prompt."""

    preset: str = ""  # the preset's name
    description: str = ""  # the preset's style text
    colors: tuple[str, ...] = ()  # brand colours as "#rrggbb"
    title: str = ""  # a short title (the draft renderer prints it)


@dataclass(frozen=True)
class GeneratedImage:
    data: bytes
    content_type: str
    draft: bool
    provider: str


class ImageProvider(Protocol):
    name: str
    draft: bool

    def generate(
        self, prompt: str, width: int, height: int, style: ImageStyle
    ) -> GeneratedImage: ...


def image_provider(settings: Settings) -> ImageProvider:
    """The configured provider: the images API when IMAGE_PROVIDER_URL is set, else drafts."""
    if settings.image_provider_url:
        return OpenAIImagesProvider(
            settings.image_provider_url, settings.image_provider_key, settings.image_model
        )
    return LocalDraftRenderer()


# --- colours ---------------------------------------------------------------------------


def normalise_colours(values: Any, limit: int = 6) -> tuple[str, ...]:
    """The usable colours of a brand palette as "#rrggbb" (names and #rgb accepted)."""
    colours: list[str] = []
    for value in values if isinstance(values, list | tuple) else []:
        if not isinstance(value, str) or not 0 < len(value.strip()) <= 30:
            continue
        try:
            red, green, blue = ImageColor.getrgb(value.strip())[:3]
        except ValueError:
            continue
        hex_value = f"#{red:02x}{green:02x}{blue:02x}"
        if hex_value not in colours:
            colours.append(hex_value)
    return tuple(colours[:limit])


def _rgb(colour: str) -> tuple[int, int, int]:
    return ImageColor.getrgb(colour)[:3]


def _shade(rgb: tuple[int, int, int], amount: float = 0.35) -> tuple[int, int, int]:
    """A darker shade of a light colour, or a lighter tint of a dark one."""
    if _luminance(rgb) > 0.4:
        red, green, blue = (round(v * (1 - amount)) for v in rgb)
    else:
        red, green, blue = (round(v + (255 - v) * amount) for v in rgb)
    return red, green, blue


def _luminance(rgb: tuple[int, int, int]) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    red, green, blue = (channel(v) for v in rgb)
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


# --- an OpenAI-compatible images API ---------------------------------------------------

# Sizes each known model family accepts; other models get the exact size asked for.
MODEL_SIZES: dict[str, tuple[tuple[int, int], ...]] = {
    "gpt-image": ((1024, 1024), (1536, 1024), (1024, 1536)),
    "dall-e-3": ((1024, 1024), (1792, 1024), (1024, 1792)),
    "dall-e-2": ((1024, 1024),),
}


def images_endpoint(base_url: str) -> str:
    base = base_url.strip().rstrip("/")
    if base.endswith("/images/generations"):
        return base
    if not base.endswith("/v1"):
        base = f"{base}/v1"
    return f"{base}/images/generations"


def _sniff(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or "")[:300]
    if isinstance(error, str):
        return error[:300]
    return ""


class OpenAIImagesProvider:
    """POST {base}/v1/images/generations with {model, prompt, size, response_format}."""

    draft = False

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ):
        self.endpoint = images_endpoint(base_url)
        parts = urlsplit(self.endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise MediaError(
                "The image provider is misconfigured: IMAGE_PROVIDER_URL must be an http(s) URL."
            )
        self.host = parts.netloc
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.transport = transport
        self.name = f"{model} at {self.host}"

    def size_for(self, width: int, height: int) -> str:
        for family, sizes in MODEL_SIZES.items():
            if self.model.startswith(family):
                wanted = math.log(width / height)
                best = min(sizes, key=lambda size: abs(math.log(size[0] / size[1]) - wanted))
                return f"{best[0]}x{best[1]}"
        return f"{width}x{height}"

    def request_body(self, prompt: str, width: int, height: int, style: ImageStyle) -> dict:
        body = {
            "model": self.model,
            "prompt": full_prompt(prompt, style),
            "size": self.size_for(width, height),
            "response_format": "b64_json",
        }
        if self.model.startswith("gpt-image"):
            # OpenAI's GPT image models always answer in base64 and reject this field.
            del body["response_format"]
        return body

    def generate(self, prompt: str, width: int, height: int, style: ImageStyle) -> GeneratedImage:
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = self.request_body(prompt, width, height, style)
        where = f"the image provider ({self.host})"
        try:
            with httpx.Client(timeout=self.timeout, transport=self.transport) as client:
                response = client.post(self.endpoint, json=body, headers=headers)
        except httpx.TimeoutException as error:
            raise MediaError(
                f"{where.capitalize()} did not answer within {self.timeout:g} seconds."
            ) from error
        except httpx.HTTPError as error:
            raise MediaError(f"Could not reach {where}: {error}.") from error
        if response.status_code >= 400:
            detail = _error_message(response)
            if response.status_code in (401, 403):
                meaning = "refused the API key (check IMAGE_PROVIDER_KEY)"
            elif response.status_code == 429:
                meaning = "is rate limiting or out of quota"
            elif response.status_code >= 500:
                meaning = "had an internal error"
            else:
                meaning = "rejected the request"
            message = f"{where.capitalize()} {meaning}: HTTP {response.status_code}"
            raise MediaError(f"{message}: {detail}" if detail else f"{message}.")
        data = self._image_bytes(response, where)
        return GeneratedImage(
            data=data, content_type=_sniff(data) or "image/png", draft=False, provider=self.name
        )

    def _image_bytes(self, response: httpx.Response, where: str) -> bytes:
        if len(response.content) > MAX_IMAGE_BYTES * 4 // 3 + 1024:
            raise MediaError(f"{where.capitalize()} sent an image that is too large.")
        try:
            payload = response.json()
            item = payload["data"][0]
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise MediaError(f"{where.capitalize()} answered without any image data.") from error
        encoded = item.get("b64_json") if isinstance(item, dict) else None
        if not isinstance(encoded, str) or not encoded:
            raise MediaError(f"{where.capitalize()} answered without base64 image data (b64_json).")
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as error:
            raise MediaError(f"{where.capitalize()} sent image data that is not base64.") from error
        if _sniff(data) is None:
            raise MediaError(
                f"{where.capitalize()} sent data that is not a PNG, JPEG or WebP image."
            )
        return data


def full_prompt(prompt: str, style: ImageStyle) -> str:
    parts = [prompt.strip()]
    if style.description.strip():
        parts.append(f"Style: {style.description.strip()}")
    elif style.preset.strip():
        parts.append(f"Style: {style.preset.strip()}")
    if style.colors:
        parts.append("Brand colours to feature: " + ", ".join(style.colors) + ".")
    return "\n\n".join(parts)[:MAX_PROMPT_CHARS]


# --- a local draft renderer ------------------------------------------------------------


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError):  # a Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def _wrap(draw: ImageDraw.ImageDraw, text: str, font, width: int, max_lines: int) -> list[str]:
    """Greedy word wrap to `width` pixels; a last line that does not fit ends with '...'."""
    words: list[str] = []
    for word in " ".join(text.split()).split(" "):
        # Very long words are cut so that they wrap too.
        while word and draw.textlength(word, font=font) > width:
            cut = max(1, int(len(word) * width / draw.textlength(word, font=font)) - 1)
            words.append(word[:cut])
            word = word[cut:]
        if word:
            words.append(word)
    lines: list[str] = []
    current = ""
    for word in words:
        candidate = f"{current} {word}".strip()
        if draw.textlength(candidate, font=font) <= width:
            current = candidate
            continue
        lines.append(current)
        current = word
        if len(lines) == max_lines:
            last = lines[-1]
            while last and draw.textlength(last + "...", font=font) > width:
                last = last[:-1]
            lines[-1] = last.rstrip() + "..."
            return lines
    if current:
        lines.append(current)
    return lines


class LocalDraftRenderer:
    """Draws a layout draft: a gradient and shapes in the brand colours, the title, the
    prompt and the style, and a "DRAFT RENDER" label. Deterministic for the same input."""

    name = DRAFT_PROVIDER
    draft = True

    def generate(self, prompt: str, width: int, height: int, style: ImageStyle) -> GeneratedImage:
        colours = style.colors or FALLBACK_COLOURS
        palette = [_rgb(c) for c in colours]
        if len(palette) == 1:
            palette.append(_shade(palette[0]))  # a second colour, visibly different
        seed = hashlib.sha256(f"{prompt}|{style}|{width}x{height}".encode()).digest()
        rng = random.Random(seed)

        image = self._background(width, height, palette[0], palette[1])
        overlay = Image.new("RGBA", (width, height), (0, 0, 0, 0))
        shapes = ImageDraw.Draw(overlay)
        short = min(width, height)
        for n in range(rng.randint(4, 7)):
            colour = palette[(n + 1) % len(palette)] if len(palette) > 2 else palette[n % 2]
            if n % 2:
                colour = _shade(colour, 0.2)
            alpha = rng.randint(70, 150)
            size = rng.randint(short // 6, short // 2)
            x = rng.randint(-size // 3, width - size * 2 // 3)
            y = rng.randint(-size // 3, int(height * 0.55))
            box = (x, y, x + size, y + size)
            if n % 3 == 2:
                shapes.rounded_rectangle(box, radius=size // 6, fill=(*colour, alpha))
            else:
                shapes.ellipse(box, fill=(*colour, alpha))
        image = Image.alpha_composite(image.convert("RGBA"), overlay)
        self._text(image, prompt, style, palette)
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, format="PNG")
        return GeneratedImage(buffer.getvalue(), "image/png", draft=True, provider=self.name)

    @staticmethod
    def _background(width: int, height: int, top: tuple, bottom: tuple) -> Image.Image:
        mask = Image.linear_gradient("L").resize((width, height))
        return Image.composite(
            Image.new("RGB", (width, height), bottom), Image.new("RGB", (width, height), top), mask
        )

    @staticmethod
    def _panel_and_label(image: Image.Image, margin: int, panel_top: int, panel: tuple) -> None:
        """The translucent text panel and the "DRAFT RENDER" label, top left."""
        width, height = image.size
        short = min(width, height)
        overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
        draw = ImageDraw.Draw(overlay)
        draw.rounded_rectangle(
            (margin, panel_top, width - margin, height - margin), radius=margin // 2, fill=panel
        )
        # The label: always visible, top left.
        label_font = _font(max(12, short // 30))
        label = "DRAFT RENDER"
        label_width = draw.textlength(label, font=label_font)
        pad = max(6, short // 90)
        label_height = max(12, short // 30)
        draw.rounded_rectangle(
            (margin, margin, margin + label_width + pad * 2, margin + label_height + pad * 2),
            radius=pad,
            fill=(20, 24, 28, 220),
        )
        draw.text((margin + pad, margin + pad), label, font=label_font, fill=(255, 214, 90))
        image.alpha_composite(overlay)

    @staticmethod
    def _text(image: Image.Image, prompt: str, style: ImageStyle, palette: list) -> None:
        width, height = image.size
        short = min(width, height)
        margin = max(16, short // 18)
        panel_top = int(height * (0.45 if width > height * 1.2 else 0.58))
        light = _luminance(palette[0]) < 0.45
        panel = (255, 255, 255, 215) if light else (20, 24, 28, 205)
        ink = (24, 28, 32) if light else (250, 250, 245)
        muted = (80, 86, 92) if light else (200, 204, 208)

        LocalDraftRenderer._panel_and_label(image, margin, panel_top, panel)

        draw = ImageDraw.Draw(image)
        inner = width - margin * 4
        x = margin * 2
        y = panel_top + margin
        bottom = height - margin * 2
        title_size = max(14, short // 18)
        body_size = max(12, short // 32)
        title_font, body_font = _font(title_size), _font(body_size)
        title = style.title.strip() or " ".join(prompt.split()[:8])
        swatch = max(8, short // 40)
        swatches = palette[:6]
        title_width = max(inner // 2, inner - len(swatches) * (swatch + swatch // 2) - swatch)
        for line in _wrap(draw, title, title_font, title_width, 2):
            draw.text((x, y), line, font=title_font, fill=ink)
            y += int(title_size * 1.25)
        y += body_size // 2
        style_line = " / ".join(p for p in (style.preset.strip(), style.description.strip()) if p)
        reserved = int(body_size * 1.4) * (2 if style_line else 1)
        body_lines = max(1, (bottom - y - reserved) // int(body_size * 1.35))
        for line in _wrap(draw, prompt, body_font, inner, body_lines):
            draw.text((x, y), line, font=body_font, fill=ink)
            y += int(body_size * 1.35)
        if style_line:
            footer = _wrap(draw, f"Style: {style_line}", body_font, inner, 1)
            draw.text((x, bottom - body_size), footer[0], font=body_font, fill=muted)
        for n, colour in enumerate(swatches):
            left = width - margin * 2 - (n + 1) * (swatch + swatch // 2)
            draw.rectangle(
                (left, panel_top + margin, left + swatch, panel_top + margin + swatch),
                fill=colour,
                outline=muted,
            )
