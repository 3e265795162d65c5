"""generate_image through the configured provider: an OpenAI-compatible images API
(against a tiny local server), or the local draft renderer without one."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.tools.results import ToolFailure
from app.workspace.models import VisualAsset
from tests.media import ImagesAPI
from tests.tools import make_workspace


@pytest.fixture
def images_api():
    api = ImagesAPI().start()
    yield api
    api.stop()


# --- generate_image with the HTTP provider ---------------------------------------------


@pytest.fixture
def ws_http(make_app, images_api):
    app = make_app(image_provider_url=images_api.url, image_provider_key="sk-test")
    workspace = make_workspace(app)
    yield workspace
    workspace.session.close()


def test_generate_image_through_the_http_provider_stores_the_asset(ws_http, images_api):
    ws = ws_http
    models = ws.call("list_generation_models").content
    assert models["images"]["provider"].startswith("gpt-image-1 at 127.0.0.1:")
    assert models["images"]["draft"] is False

    result = ws.call("generate_image", {"prompt": "A calm kitchen", "offer_id": ws.ids["offer"]})
    asset = ws.session.get(VisualAsset, result.content["asset_id"])
    assert asset.data == images_api.image and asset.content_type == "image/png"
    assert asset.meta["draft"] is False and asset.meta["provider"].startswith("gpt-image-1")
    assert result.content["draft"] is False and "note" not in result.content
    assert result.visible_rows[0]["meta"]["agentOutput"]["draft"] is False
    assert "#2f6f5e" in images_api.requests[0]["body"]["prompt"]


def test_a_provider_error_through_the_tool_writes_nothing(ws_http, images_api):
    ws = ws_http
    images_api.status, images_api.payload = 400, {"error": {"message": "Bad prompt"}}
    count = select(func.count()).select_from(VisualAsset)
    before = ws.session.scalar(count)
    with pytest.raises(ToolFailure, match="HTTP 400: Bad prompt"):
        ws.call("generate_image", {"prompt": "x"})
    assert ws.session.scalar(count) == before


def test_list_generation_models_without_a_provider(make_app):
    ws = make_workspace(make_app())
    try:
        models = ws.call("list_generation_models").content
        assert models["images"]["provider"] == "local-draft" and models["images"]["draft"]
        assert models["video"]["available"] is False
    finally:
        ws.session.close()
