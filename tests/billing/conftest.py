"""Billing tests drive real runs: the app talks to the fake model server, a person is
logged in (tests/billing/__init__.py reads usage; tests/factories.py sets allowances)."""

from __future__ import annotations

import pytest


@pytest.fixture
def app(app_on_fake_model):
    return app_on_fake_model
