"""Image providers: an OpenAI-compatible images API (against a tiny local server) and the
local draft renderer."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from app.config import load_settings
from app.media.providers import (
    ImageStyle,
    LocalDraftRenderer,
    MediaError,
    OpenAIImagesProvider,
    image_provider,
    images_endpoint,
    normalise_colours,
)
from tests.media import ImagesAPI


@pytest.fixture
def images_api():
    api = ImagesAPI().start()
    yield api
    api.stop()


STYLE = ImageStyle(preset="Editorial", description="Soft light", colors=("#2f6f5e",), title="T")


# --- the HTTP provider -----------------------------------------------------------------


def test_the_http_provider_posts_the_openai_request_and_decodes_the_image(images_api):
    provider = OpenAIImagesProvider(images_api.url, "sk-test", "gpt-image-1")
    image = provider.generate("A calm kitchen", 816, 1024, STYLE)
    assert image.data == images_api.image
    assert image.content_type == "image/png"
    assert image.draft is False
    assert image.provider == f"gpt-image-1 at 127.0.0.1:{images_api.server.server_address[1]}"
    (sent,) = images_api.requests
    assert sent["path"] == "/v1/images/generations"
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    body = sent["body"]
    assert body["model"] == "gpt-image-1"
    assert body["size"] == "1024x1536"  # the nearest size that model accepts to 4:5
    assert body["prompt"].startswith("A calm kitchen")
    assert "Soft light" in body["prompt"] and "#2f6f5e" in body["prompt"]
    # GPT image models always answer in base64 and reject response_format.
    assert "response_format" not in body


def test_other_models_are_asked_for_base64_at_their_sizes(images_api):
    OpenAIImagesProvider(images_api.url + "/v1/", None, "dall-e-3").generate(
        "x", 1024, 576, ImageStyle()
    )
    OpenAIImagesProvider(images_api.url, None, "flux-dev").generate("x", 576, 1024, ImageStyle())
    dalle, flux = (sent["body"] for sent in images_api.requests)
    assert dalle == {
        "model": "dall-e-3",
        "prompt": "x",
        "size": "1792x1024",
        "response_format": "b64_json",
    }
    assert flux["size"] == "576x1024" and flux["response_format"] == "b64_json"
    assert "authorization" not in images_api.requests[1]["headers"]
    assert {sent["path"] for sent in images_api.requests} == {"/v1/images/generations"}


@pytest.mark.parametrize(
    ("status", "payload", "expected"),
    [
        (
            400,
            {"error": {"message": "Your prompt was rejected by the safety system."}},
            "rejected the request: HTTP 400: Your prompt was rejected by the safety system.",
        ),
        (401, {"error": {"message": "Incorrect API key"}}, "check IMAGE_PROVIDER_KEY"),
        (429, {"error": "slow down"}, "rate limiting or out of quota: HTTP 429: slow down"),
        (500, b"<html>boom</html>", "internal error: HTTP 500"),
        (200, {"data": []}, "answered without any image data"),
        (200, {"data": [{"url": "https://example.com/x.png"}]}, "without base64 image data"),
        (200, {"data": [{"b64_json": "***"}]}, "not base64"),
        (200, {"data": [{"b64_json": base64.b64encode(b"hello").decode()}]}, "not a PNG"),
        (200, b"not json", "answered without any image data"),
    ],
)
def test_http_provider_failures_are_clear_media_errors(images_api, status, payload, expected):
    images_api.status, images_api.payload = status, payload
    provider = OpenAIImagesProvider(images_api.url, "k", "gpt-image-1")
    with pytest.raises(MediaError) as caught:
        provider.generate("x", 1024, 1024, ImageStyle())
    assert expected in str(caught.value)
    assert str(caught.value).startswith(("The image provider (127.0.0.1:", "Could not reach"))


def test_http_provider_timeouts_and_unreachable_hosts(images_api):
    images_api.delay = 1.0
    slow = OpenAIImagesProvider(images_api.url, None, "gpt-image-1", timeout=0.2)
    with pytest.raises(MediaError, match="did not answer within 0.2 seconds"):
        slow.generate("x", 1024, 1024, ImageStyle())
    closed = OpenAIImagesProvider("http://127.0.0.1:9", None, "gpt-image-1", timeout=2)
    with pytest.raises(MediaError, match=r"Could not reach the image provider \(127"):
        closed.generate("x", 1024, 1024, ImageStyle())
    with pytest.raises(MediaError, match="IMAGE_PROVIDER_URL"):
        OpenAIImagesProvider("ftp://example.com", None, "gpt-image-1")


def test_endpoint_and_provider_choice():
    assert images_endpoint("https://api.openai.com") == (
        "https://api.openai.com/v1/images/generations"
    )
    assert images_endpoint("https://api.openai.com/v1/") == (
        "https://api.openai.com/v1/images/generations"
    )
    assert images_endpoint("http://h/v1/images/generations") == "http://h/v1/images/generations"
    env = {"SECRET_KEY": "k"}
    assert isinstance(image_provider(load_settings(env=env)), LocalDraftRenderer)
    configured = load_settings(
        env={**env, "IMAGE_PROVIDER_URL": "https://img.example", "IMAGE_PROVIDER_KEY": "sk"}
    )
    assert configured.image_model == "gpt-image-1"
    assert configured.video_provider_url is None
    provider = image_provider(configured)
    assert isinstance(provider, OpenAIImagesProvider)
    assert (provider.api_key, provider.model) == ("sk", "gpt-image-1")
    other = load_settings(env={**env, "IMAGE_MODEL": "dall-e-3", "VIDEO_PROVIDER_URL": "http://v"})
    assert (other.image_model, other.video_provider_url) == ("dall-e-3", "http://v")


# --- the draft renderer ----------------------------------------------------------------


def test_the_draft_renderer_draws_a_labelled_png_in_the_brand_colours():
    renderer = LocalDraftRenderer()
    image = renderer.generate("Founder at sunrise " * 20, 576, 1024, STYLE)
    assert (image.draft, image.provider, image.content_type) == (True, "local-draft", "image/png")
    picture = Image.open(io.BytesIO(image.data))
    assert picture.format == "PNG" and picture.size == (576, 1024)
    colours = {colour for _count, colour in picture.convert("RGB").getcolors(1 << 20)}
    assert (0x2F, 0x6F, 0x5E) in colours  # the brand colour itself, at the top
    # Deterministic: the same input draws the same picture.
    assert renderer.generate("Founder at sunrise " * 20, 576, 1024, STYLE).data == image.data
    # No colours, one colour, odd words: still a picture.
    for style in (ImageStyle(), ImageStyle(colors=("#ffffff",))):
        assert Image.open(io.BytesIO(renderer.generate("x" * 300, 1024, 1024, style).data)).size


def test_brand_colours_are_normalised():
    assert normalise_colours(["#ABC", "teal", "not a colour", 7, "#2f6f5e", "#2F6F5E"]) == (
        "#aabbcc",
        "#008080",
        "#2f6f5e",
    )
    assert normalise_colours(None) == ()
