"""Secrets at rest: an MCP server's headers (and later its tokens) sealed with a key
derived from SECRET_KEY, or from MCP_SECRET_KEY where set, so a copy of the database alone
reads none of them. Fernet (AES-128-CBC with HMAC-SHA256, from `cryptography`): a changed
or truncated value fails to open rather than yielding garbage."""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PURPOSE = b"loopdesk mcp secrets v1"


class SecretUnreadable(Exception):
    """A sealed value that this key cannot open (the key changed, or the value did)."""


class SecretBox:
    def __init__(self, key_material: str) -> None:
        if not key_material:
            raise ValueError("a secret box needs key material (SECRET_KEY)")
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=PURPOSE).derive(
            key_material.encode()
        )
        self._fernet = Fernet(base64.urlsafe_b64encode(derived))

    def seal(self, value: Any) -> bytes:
        return self._fernet.encrypt(json.dumps(value).encode())

    def open(self, sealed: bytes) -> Any:
        try:
            return json.loads(self._fernet.decrypt(sealed))
        except (InvalidToken, ValueError) as exc:
            raise SecretUnreadable("a stored secret could not be read with this key") from exc


def masked(value: str) -> str:
    """What a page may show of a secret: its length's shape, never its text."""
    return "•" * 8 if value else ""
