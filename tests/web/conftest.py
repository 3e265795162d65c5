"""Fixtures for the web tests."""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher

import app.accounts.models as account_models
from tests.factories import add_conversation, add_offer, add_persona, add_token, add_user


@pytest.fixture(autouse=True)
def fast_password_hashing(monkeypatch):
    """Argon2 with its production cost takes ~0.3 s a hash here; the web tests hash and
    verify hundreds of passwords. Same algorithm, cheap parameters."""
    monkeypatch.setattr(
        account_models, "_hasher", PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
    )


@pytest.fixture
def bob(app):
    """Someone else, with one of everything: a chat, an offer, a persona and a token."""
    user_id = add_user(app, "bob@example.com")
    offer_id = add_offer(app, user_id, "Bob's Bakery", brand_colors=["#aa0000"])
    token_id, raw = add_token(app, user_id, "bob's script")
    return {
        "id": user_id,
        "conversation": add_conversation(app, user_id, "Bob's private chat"),
        "offer": offer_id,
        "persona": add_persona(app, user_id, "Bob's Buyer", offer_id=offer_id),
        "token": token_id,
        "raw_token": raw,
    }
