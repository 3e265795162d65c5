"""The chat tests drive runs: the app talks to the fake model server (the `chat` driver
is tests/conftest.py's)."""

from __future__ import annotations

import pytest


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model
